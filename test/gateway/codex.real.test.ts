import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listModelCalls, meteredUsage } from "../../src/store/model-calls.js";
import { createTestApp, httpApi, listen, type TestApp } from "../support/app.js";
import { CODEX_TEST_MODEL, type CodexEnv, makeCodexEnv } from "../support/codex-env.js";
import { BACKENDS } from "../support/db.js";
import { callOutput, type MockOpenAI, shellCall, startMockOpenAI } from "../support/mock-openai.js";

// The real codex CLI through the model gateway (src/gateway/openai.ts), against the mock Responses
// API as the operator's upstream: what the agent holds, what its run's token is worth, and what
// the gateway meters. On each database, since the metering is stored there.

/** The operator's key: given to the server in a file, as docs/security.md's production set-up does. */
const OPERATOR_KEY = "sk-proj-operator-secret-0123456789";

describe.each(BACKENDS)("the model gateway with the real codex CLI on %s", (backend) => {
  let mock: MockOpenAI;
  let ce: CodexEnv;
  let keyFile: string;
  let t: TestApp;
  let server: { url: string; close(): Promise<void> };
  let api: ReturnType<typeof httpApi>;

  beforeAll(async () => {
    mock = await startMockOpenAI({ quiet: true });
    ce = await makeCodexEnv(mock.url);
    keyFile = join(ce.codexHome, "..", "operator-openai-key");
    await writeFile(keyFile, `${OPERATOR_KEY}\n`);
    t = await createTestApp(backend, {
      ...ce.env,
      // The operator's key comes from a file; codex's own test key is not given.
      OPENAI_API_KEY: "",
      OPENAI_API_KEY_FILE: keyFile,
      AGENT_BRIDGE_AGENT: "codex",
      AGENT_BRIDGE_WORK_DIR: ce.cwd,
      AGENT_BRIDGE_PERMISSION_MODE: "dangerously-skip-permissions",
    });
    server = await listen(t.app);
    api = httpApi(server.url);
  });
  afterAll(async () => {
    await server.close();
    await t.close();
    await mock.close();
    await ce.cleanup();
  });

  /** Sends a message and waits for its run's end, as JSON. */
  const send = async (text: string) => {
    const session = await api.newSession();
    const res = await api.postMessage(session.id, text, { Accept: "application/json" });
    return (await res.json()) as {
      run: { id: string; status: string };
      completion: Record<string, unknown>;
    };
  };

  it("a danger-full-access run's agent finds no key of the operator's, nor its file, in its environment or codex's, and the run succeeds through the gateway", async () => {
    const before = mock.requests.length;
    mock.script(
      // codex's own environment too: its shell tool leaves variables named *KEY* out of the
      // commands' environment, but codex holds them.
      { output: [shellCall("printenv; echo ---; tr '\\0' '\\n' < /proc/$PPID/environ", "env")] },
      { output: [{ type: "message", text: "That is all of it." }] },
    );
    const { run } = await send("print your environment and codex's");
    expect(run.status).toBe("succeeded");

    const output = callOutput(mock.responsesRequests().at(-1), "env") ?? "";
    expect(output).toContain("---"); // both commands ran
    expect(output).toMatch(/^CODEX_HOME=/m);
    expect(output).not.toContain(OPERATOR_KEY);
    expect(output).not.toContain(keyFile);
    expect(output).not.toContain(mock.url);
    // codex holds its run's token in the variable the operator's key came from.
    expect(output).toMatch(/^OPENAI_API_KEY=abrun_[\w-]{43}$/m);
    // The gateway put the operator's key on every call, in place of the run's token.
    const calls = mock.requests.slice(before);
    expect(calls.map((call) => `${call.method} ${call.path}`)).toEqual([
      "POST /v1/responses",
      "POST /v1/responses",
    ]);
    for (const call of calls) expect(call.headers.authorization).toBe(`Bearer ${OPERATOR_KEY}`);
  });

  it("meters each call's usage as the upstream reported it, against its run", async () => {
    const toolTurn = { input_tokens: 1200, cached_tokens: 800, output_tokens: 35 };
    const textTurn = { input_tokens: 1500, cached_tokens: 1100, output_tokens: 12 };
    mock.script(
      { output: [shellCall("echo metered")], usage: toolTurn },
      { output: [{ type: "message", text: "Metered." }], usage: textTurn },
    );
    const { run, completion } = await send("run something");
    expect(run.status).toBe("succeeded");
    await t.deps.gateway.recorded();
    const served = [toolTurn, textTurn].map((u) => ({
      endpoint: "/responses",
      model: CODEX_TEST_MODEL,
      inputTokens: u.input_tokens - u.cached_tokens,
      outputTokens: u.output_tokens,
      cacheReadTokens: u.cached_tokens,
      cacheCreationTokens: 0,
      status: 200,
      error: null,
      requestId: expect.stringMatching(/^req_mock/),
    }));
    expect(await listModelCalls(t.database.db, run.id)).toMatchObject(served);
    expect(await meteredUsage(t.database.db, run.id)).toMatchObject({
      calls: 2,
      inputTokens: 800,
      outputTokens: 47,
      cacheReadTokens: 1900,
      cacheCreationTokens: 0,
      // The mock's model (gpt-5.5) has no built-in price.
      costUsd: 0,
      pricedCalls: 0,
    });
    // What codex reported agrees.
    expect(completion.usage).toMatchObject({
      input_tokens: 800,
      output_tokens: 47,
      cache_read_tokens: 1900,
    });
  });

  it("the run's token serves any client inside the run (curl lists the models), and gets the API's 401 once the run is over, as a made-up one does", async () => {
    const baseUrl = `${(await t.deps.gateway.listen()).url}/openai`;
    // The token as the agent finds it: in codex's environment.
    const token = "$(tr '\\0' '\\n' < /proc/$PPID/environ | sed -n 's/^OPENAI_API_KEY=//p')";
    mock.script(
      {
        output: [
          shellCall(
            `T="${token}"; curl -s -H "Authorization: Bearer $T" ${baseUrl}/models; echo; echo "$T"`,
            "models",
          ),
        ],
      },
      { output: [{ type: "message", text: "Listed." }] },
    );
    const { run } = await send("list the models");
    expect(run.status).toBe("succeeded");
    // The command's output, after the lines codex puts before it.
    const printed = callOutput(mock.responsesRequests().at(-1), "models") ?? "";
    const models = /^\{.*\}$/m.exec(printed)?.[0] ?? "";
    const held = /^abrun_.*$/m.exec(printed)?.[0] ?? "";
    expect(JSON.parse(models)).toMatchObject({ data: [{ id: CODEX_TEST_MODEL }] });
    expect(held).toMatch(/^abrun_[\w-]{43}$/);

    const before = mock.requests.length;
    for (const key of [held, `abrun_${"A".repeat(43)}`]) {
      const res = await fetch(`${baseUrl}/responses`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: CODEX_TEST_MODEL, input: "still there?", stream: false }),
      });
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual({
        error: {
          message: expect.any(String),
          type: "invalid_request_error",
          code: "invalid_api_key",
          param: null,
        },
      });
    }
    // Neither reached the upstream.
    expect(mock.requests.length).toBe(before);
  });
});
