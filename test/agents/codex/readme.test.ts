import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CODEX_TEST_KEY, type CodexEnv, makeCodexEnv } from "../../support/codex-env.js";
import { type MockOpenAI, startMockOpenAI } from "../../support/mock-openai.js";
import { runCommand } from "../../support/process.js";
import { codeBlocks, docSection } from "../../support/readme.js";
import { SseReader } from "../../support/sse.js";
import { type UserServer, userServer } from "../../support/user-server.js";

// The README's Agents example, as a user runs it: the server started with the variables its
// `npm start` line sets (the key it shows abbreviated is the test's), and its curl, with the
// API key the server printed.

describe("the README's Agents example", () => {
  let mock: MockOpenAI;
  let ce: CodexEnv;
  let server: UserServer;
  let curl: string;

  beforeAll(async () => {
    const [block] = codeBlocks(await docSection("docs/agents.md", "Agents"), "sh");
    if (!block) throw new Error("docs/agents.md has no sh block under Agents");
    const lines = block
      .replaceAll("\\\n", "")
      .split("\n")
      .filter((l) => l.trim() !== "" && !l.startsWith("#"));
    const start = lines.find((l) => l.endsWith("npm start")) ?? "";
    curl = lines.find((l) => l.startsWith("curl")) ?? "";
    const env = Object.fromEntries(
      [...start.matchAll(/(\w+)=(\S+)/g)].map(([, name = "", value = ""]) => [
        name,
        value === "sk-…" ? CODEX_TEST_KEY : value,
      ]),
    );
    expect(env).toMatchObject({ AGENT_BRIDGE_AGENTS: "claude,codex" });
    mock = await startMockOpenAI({ quiet: true });
    ce = await makeCodexEnv(mock.url);
    // Where this machine's codex finds its (mock) provider: ~/.codex for a user; and where the
    // bridge's gateway forwards codex's calls, which is the mock's too.
    server = await userServer(
      { steps: [] },
      {
        ...env,
        CODEX_HOME: ce.codexHome,
        AGENT_BRIDGE_CODEX_BASE_URL: ce.env.AGENT_BRIDGE_CODEX_BASE_URL ?? "",
      },
    );
  });
  afterAll(async () => {
    await server?.close();
    await mock?.close();
    await ce?.cleanup();
  });

  it("creates a codex session with the curl it shows, and the session runs codex", async () => {
    const res = await runCommand(
      "bash",
      ["-c", [`B=${server.url}`, `H="Authorization: Bearer ${server.key}"`, curl].join("\n")],
      { env: { PATH: process.env.PATH } },
    );
    const session = JSON.parse(res.stdout) as { id: string };
    expect(session).toMatchObject({
      agent: "codex",
      permission_mode: "acceptEdits",
      model: "gpt-5.5",
    });
    mock.script({ output: [{ type: "message", text: "Hi from codex." }] });
    const frames = await SseReader.of(
      await fetch(`${server.url}/v1/sessions/${session.id}/messages`, {
        method: "POST",
        headers: { Authorization: `Bearer ${server.key}`, "Content-Type": "application/json" },
        body: JSON.stringify({ text: "Hello" }),
      }),
    ).events();
    expect(frames.at(-1)?.data).toMatchObject({ status: "succeeded", result: "Hi from codex." });
  });
});
