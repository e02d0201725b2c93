import { execFileSync } from "node:child_process";
import { copyFile, mkdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestApp, listen, type TestApp } from "../../support/app.js";
import { CODEX_BIN, type CodexEnv, makeCodexEnv } from "../../support/codex-env.js";
import { REAL_CLI_BACKENDS } from "../../support/db.js";
import {
  callOutput,
  type MockOpenAI,
  shellCall,
  startMockOpenAI,
} from "../../support/mock-openai.js";
import { SseReader } from "../../support/sse.js";

// An operator whose codex key is not in the environment but saved by `codex login --with-api-key`
// in their CODEX_HOME: the gateway holds it as it holds a key from the environment, and the agent
// sees neither the key nor the file. A ChatGPT login (`codex login`) holds tokens the gateway does
// not carry: codex is then refused, saying what to give it, and no call leaves the bridge.

const SAVED_KEY = "sk-test-saved-by-codex-login";

describe.each(REAL_CLI_BACKENDS)("codex's key saved by codex login, on %s", (backend) => {
  let mock: MockOpenAI;
  let ce: CodexEnv;
  let t: TestApp;
  let server: { url: string; close(): Promise<void> };
  let envWithoutKey: Record<string, string>;

  beforeAll(async () => {
    mock = await startMockOpenAI({ quiet: true });
    ce = await makeCodexEnv(mock.url);
    const { OPENAI_API_KEY: _, ...rest } = ce.env;
    envWithoutKey = rest;
    execFileSync(CODEX_BIN, ["login", "--with-api-key"], {
      input: `${SAVED_KEY}\n`,
      env: envWithoutKey,
      stdio: ["pipe", "ignore", "ignore"],
    });
    t = await createTestApp(backend, {
      ...envWithoutKey,
      AGENT_BRIDGE_AGENTS: "claude,codex",
      AGENT_BRIDGE_WORK_DIR: ce.cwd,
    });
    server = await listen(t.app);
  });
  afterAll(async () => {
    await server?.close();
    await t?.close();
    await mock?.close();
    await ce?.cleanup();
  });

  async function runCodex(text: string) {
    const session = await (
      await fetch(`${server.url}/v1/sessions`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ agent: "codex", permission_mode: "bypassPermissions" }),
      })
    ).json();
    const res = await fetch(`${server.url}/v1/sessions/${session.id}/messages`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ text }),
    });
    return SseReader.of(res).events();
  }

  it("readyz names auth.json as where codex's key comes from", async () => {
    const body = await (await fetch(`${server.url}/readyz`)).json();
    expect(body.agents.codex).toMatchObject({ credentials: "auth.json" });
  });

  it("forwards codex's calls with the saved key, while the agent finds neither the key nor the login file", async () => {
    mock.script(
      {
        output: [
          shellCall(
            'printenv; cat "$CODEX_HOME/auth.json" 2>&1; cat /proc/$PPID/environ 2>&1 | tr "\\0" "\\n"',
            "call_look",
          ),
        ],
      },
      { output: [{ type: "message", text: "Looked." }] },
    );
    const frames = await runCodex("Look around");
    expect(frames.at(-1)?.data).toMatchObject({ status: "succeeded", result: "Looked." });
    const seen = callOutput(mock.responsesRequests().at(-1), "call_look") ?? "";
    // The command ran and printed codex's environment: its own variables are there.
    expect(seen).toContain("CODEX_HOME=");
    expect(seen).not.toContain(SAVED_KEY);
    const calls = mock.requests.filter((r) => r.path === "/v1/responses");
    expect(calls.length).toBeGreaterThanOrEqual(2);
    for (const call of calls) expect(call.headers.authorization).toBe(`Bearer ${SAVED_KEY}`);
  });

  it("refuses codex with only a ChatGPT login: readyz and the run both say to give it an API key, and nothing reaches the API", async () => {
    // Its config (the mock's provider) alone: the first home's codex may still be closing its
    // state database, whose files come and go under a copy of the whole directory.
    const chatgptHome = join(ce.codexHome, "..", "chatgpt-codex");
    await mkdir(chatgptHome);
    await copyFile(join(ce.codexHome, "config.toml"), join(chatgptHome, "config.toml"));
    await writeFile(
      join(chatgptHome, "auth.json"),
      JSON.stringify({
        auth_mode: "chatgpt",
        tokens: { id_token: "x.y.z", access_token: "a.b.c", refresh_token: "r", account_id: "acc" },
        last_refresh: new Date().toISOString(),
      }),
    );
    const other = await createTestApp(backend, {
      ...envWithoutKey,
      CODEX_HOME: chatgptHome,
      AGENT_BRIDGE_AGENTS: "claude,codex",
      AGENT_BRIDGE_WORK_DIR: ce.cwd,
    });
    try {
      const ready = await other.app.request("/readyz");
      expect(ready.status).toBe(503);
      expect((await ready.json()).detail).toContain("logged in with ChatGPT");
      const before = mock.requests.length;
      const session = await (
        await other.app.request("/v1/sessions", {
          method: "POST",
          headers: { "Content-Type": "application/json" },
          body: JSON.stringify({ agent: "codex" }),
        })
      ).json();
      const reply = await (
        await other.app.request(`/v1/sessions/${session.id}/messages`, {
          method: "POST",
          headers: { "Content-Type": "application/json", Accept: "application/json" },
          body: JSON.stringify({ text: "Hello" }),
        })
      ).json();
      expect(reply.completion).toMatchObject({
        status: "failed",
        error_code: "agent_not_authenticated",
        error: expect.stringContaining("codex login --with-api-key"),
      });
      expect(mock.requests.length).toBe(before);
    } finally {
      await other.close();
      await rm(chatgptHome, { recursive: true, force: true });
    }
  });
});
