import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generateKey } from "../../src/auth/keys.js";
import { createTestApp, type TestApp } from "../support/app.js";
import { appClient } from "../support/app-client.js";
import { type ClaudeEnv, makeClaudeEnv } from "../support/claude-env.js";
import { type MockAnthropic, startMockAnthropic } from "../support/mock-anthropic.js";

// What the agent's process can see: run `env` through the real CLI and read what the model got.

describe("the agent's environment", () => {
  let mock: MockAnthropic;
  let ce: ClaudeEnv;
  let t: TestApp;
  const apiKey = generateKey();
  const databaseUrl = "postgres://bridge:db-password-123@127.0.0.1:5432/secrets";

  beforeAll(async () => {
    mock = await startMockAnthropic({ quiet: true });
    ce = await makeClaudeEnv(mock.url);
    t = await createTestApp("pglite", {
      ...ce.env,
      DATABASE_URL: databaseUrl,
      AGENT_BRIDGE_API_KEY: apiKey,
      AGENT_BRIDGE_WORK_DIR: ce.cwd,
      AGENT_BRIDGE_PERMISSION_MODE: "bypassPermissions",
    });
  });
  afterAll(async () => {
    await t.close();
    await mock.close();
    await ce.cleanup();
  });

  it("holds no DATABASE_URL, no AGENT_BRIDGE_ variable and no API key", async () => {
    mock.script(
      { blocks: [{ type: "tool_use", name: "Bash", input: { command: "env" } }] },
      { blocks: [{ type: "text", text: "That is the environment." }] },
    );
    const api = appClient(t.app);
    const session = await api.createSession();
    const { run } = await api.send(session.id, "print your environment");
    expect(run.status).toBe("succeeded");

    const toolOutput = JSON.stringify(mock.mainRequests().at(-1)?.messages.at(-1));
    expect(toolOutput).toContain("ANTHROPIC_BASE_URL="); // the command really ran
    expect(toolOutput).not.toContain("DATABASE_URL");
    expect(toolOutput).not.toContain("db-password-123");
    expect(toolOutput).not.toContain("AGENT_BRIDGE_");
    expect(toolOutput).not.toContain(apiKey);
  });
});
