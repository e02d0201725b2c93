import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, symlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EXIT } from "../../src/cli/exit-codes.js";
import { createTestApp, listen, type TestApp } from "../support/app.js";
import { type ClaudeEnv, makeClaudeEnv } from "../support/claude-env.js";
import { type MockAnthropic, startMockAnthropic } from "../support/mock-anthropic.js";
import { runCommand } from "../support/process.js";
import { docSection } from "../support/readme.js";
import { BIN } from "./run-cli.js";

// The README's `send … --approvals ask` as a user runs it: the command as the README writes it,
// in a shell, against a server with its default permission mode (acceptEdits, which lets the
// agent write files unasked), the real claude CLI behind it talking to the mock Messages API.

describe("the README's --approvals ask with the real claude CLI", () => {
  let mock: MockAnthropic;
  let ce: ClaudeEnv;
  let t: TestApp;
  let server: { url: string; close(): Promise<void> };
  let bin: string;

  beforeAll(async () => {
    mock = await startMockAnthropic({ quiet: true });
    ce = await makeClaudeEnv(mock.url);
    // No AGENT_BRIDGE_PERMISSION_MODE: the server's default.
    t = await createTestApp("pglite", { ...ce.env, AGENT_BRIDGE_WORK_DIR: ce.cwd });
    server = await listen(t.app);
    // `agent-bridge` on PATH, as `npm link` would put it.
    bin = await mkdtemp(join(tmpdir(), "agent-bridge-bin-"));
    await symlink(BIN, join(bin, "agent-bridge"));
  });
  afterAll(async () => {
    await server?.close();
    await t?.close();
    await mock?.close();
    await ce?.cleanup();
    if (bin) await rm(bin, { recursive: true, force: true });
  });

  it("asks before the agent writes the file, and the file is written once allowed", async () => {
    const section = await docSection("docs/api.md", "Using the API");
    const command = /`(agent-bridge send "Write hello to hello\.txt" --approvals ask[^`]*)`/.exec(
      section,
    )?.[1];
    if (!command) throw new Error("docs/api.md shows no `agent-bridge send … --approvals ask`");
    const file = join(ce.cwd, "hello.txt");
    mock.script(
      {
        blocks: [{ type: "tool_use", name: "Write", input: { file_path: file, content: "hello" } }],
      },
      { blocks: [{ type: "text", text: "Wrote hello.txt." }] },
    );

    const res = await runCommand("bash", ["-c", command], {
      env: {
        PATH: `${bin}:${process.env.PATH}`,
        HOME: process.env.HOME,
        AGENT_BRIDGE_URL: server.url,
      },
      input: "y\n",
    });
    expect(res.stderr).toContain(`Allow Write: ${file}? [y/n/a] `);
    expect(res).toMatchObject({ code: EXIT.ok, stdout: "Wrote hello.txt.\n" });
    expect(existsSync(file) && (await readFile(file, "utf8"))).toBe("hello");
  });
});
