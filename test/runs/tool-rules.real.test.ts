import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueKey } from "../../src/auth/keys.js";
import type { ToolRuleEntry } from "../../src/tool-rules.js";
import { createTestApp, fetchAs, listen, type TestApp } from "../support/app.js";
import { type ClaudeEnv, makeClaudeEnv } from "../support/claude-env.js";
import { REAL_CLI_BACKENDS } from "../support/db.js";
import {
  type MockAnthropic,
  type MockTurn,
  startMockAnthropic,
  toolResultText,
} from "../support/mock-anthropic.js";
import { type Frame, SseReader } from "../support/sse.js";

// Tool rules with the real `claude` binary (against the mock Messages API), in bypassPermissions,
// where the CLI itself asks for nothing: the bridge's PreToolUse hook (registered by the
// `initialize` it sends first) asks for or denies what the rules say, and nothing else.

const data = <T = Record<string, unknown>>(frame: Frame | undefined) => frame?.data as T;
const bash = (command: string): MockTurn => ({
  blocks: [{ type: "tool_use", name: "Bash", input: { command, description: command } }],
});

describe.each(REAL_CLI_BACKENDS)("tool rules with the real claude CLI on %s", (backend) => {
  let mock: MockAnthropic;
  let ce: ClaudeEnv;
  let t: TestApp;
  let server: { url: string; close(): Promise<void> };

  beforeAll(async () => {
    mock = await startMockAnthropic({ quiet: true });
    ce = await makeClaudeEnv(mock.url);
    t = await createTestApp(backend, {
      ...ce.env,
      AGENT_BRIDGE_AUTH: "keys",
      AGENT_BRIDGE_WORK_DIR: ce.cwd,
      AGENT_BRIDGE_PERMISSION_MODE: "bypassPermissions",
    });
    server = await listen(t.app);
  });
  afterAll(async () => {
    await server.close();
    await t.close();
    await mock.close();
    await ce.cleanup();
  });

  const keyWith = async (toolRules: ToolRuleEntry[]) =>
    (
      await issueKey(t.database.db, {
        name: "tenant",
        admin: false,
        permissionModes: ["bypassPermissions"],
        toolRules,
      })
    ).key;
  const post = (key: string, path: string, body: unknown) =>
    fetchAs(server.url, key, path, { method: "POST", body: JSON.stringify(body) });
  /** A session in bypass with these rules (`approvals: api` unless said); a message's full-view stream. */
  const run = async (key: string, toolRules: ToolRuleEntry[], text: string, approvals = "api") => {
    const created = await post(key, "/v1/sessions", {
      permission_mode: "bypassPermissions",
      approvals,
      tool_rules: toolRules,
    });
    expect(created.status).toBe(201);
    const session = (await created.json()) as { id: string; tool_rules: unknown };
    expect(session.tool_rules).toEqual(toolRules);
    const res = await post(key, `/v1/sessions/${session.id}/messages?events=full`, { text });
    expect(res.status).toBe(200);
    return { runId: res.headers.get("x-run-id") ?? "", sse: SseReader.of(res) };
  };

  it("in bypass, a matching Bash command is asked and runs once allowed; a non-matching one and a Read run unasked; a deny rule refuses with its reason; the commands come with descriptions", async () => {
    await mkdir(join(ce.cwd, "x"));
    mock.script(
      bash("ls"),
      bash("rm -rf x"),
      bash("touch denied.txt"),
      { blocks: [{ type: "tool_use", name: "Read", input: { file_path: join(ce.cwd, "x.txt") } }] },
      { blocks: [{ type: "text", text: "done" }] },
    );
    const seen = mock.mainRequests().length;
    const key = await keyWith([]);
    const rules: ToolRuleEntry[] = [
      { tool: "Bash", command: "rm *", decision: "ask" },
      { tool: "Bash", command: "touch *", decision: "deny", reason: "no new files" },
    ];
    const { runId, sse } = await run(key, rules, "tidy up");
    const before = await sse.until("permission_request");
    const request = data(before.at(-1));
    expect(request).toMatchObject({
      tool_name: "Bash",
      input: { command: "rm -rf x" },
      decision_reason: expect.stringContaining("the session's tool rule 0"),
    });
    const commands = data<{ commands: { name: string; description?: string }[] }>(
      before.find((f) => f.event === "available_commands"),
    ).commands;
    expect(commands.find((c) => c.name === "compact")?.description).toEqual(expect.any(String));
    const answered = await post(key, `/v1/runs/${runId}/permissions/${request.request_id}`, {
      decision: "allow",
    });
    expect(answered.status).toBe(200);
    const frames = [...before, ...(await sse.until("completion"))];

    expect(frames.filter((f) => f.event === "permission_request")).toHaveLength(1);
    const decisions = frames.filter((f) => f.event === "tool_rule").map((f) => data(f));
    expect(decisions).toEqual([
      expect.objectContaining({
        tool_name: "Bash",
        decision: "ask",
        source: "session",
        rule_index: 0,
        tool_use_id: request.tool_use_id,
      }),
      expect.objectContaining({
        tool_name: "Bash",
        decision: "deny",
        source: "session",
        rule_index: 1,
      }),
    ]);
    expect(existsSync(join(ce.cwd, "x"))).toBe(false);
    expect(existsSync(join(ce.cwd, "denied.txt"))).toBe(false);
    // The model saw the denial's reason as the tool's result.
    const afterDeny = mock.mainRequests()[seen + 3];
    expect(toolResultText(afterDeny)).toContain("no new files");
    expect(data(frames.at(-1))).toMatchObject({ status: "succeeded" });
  });

  it("under approvals deny, an ask rule's request is refused at once by policy, in bypass too", async () => {
    mock.script(bash("rm -rf z"), { blocks: [{ type: "text", text: "not removed" }] });
    const key = await keyWith([]);
    const { sse } = await run(
      key,
      [{ tool: "Bash", command: "rm *", decision: "ask" }],
      "remove z",
      "deny",
    );
    const frames = await sse.until("completion");
    const shown = frames.map((f) => f.event);
    const at = shown.indexOf("permission_request");
    // The rule's decision first (the hook is answered before the CLI asks), then the request.
    expect(shown.indexOf("tool_rule")).toBeGreaterThan(0);
    expect(shown.indexOf("tool_rule")).toBeLessThan(at);
    expect(shown[at + 1]).toBe("permission_resolved");
    expect(data(frames[at + 1])).toMatchObject({ decision: "deny", by: "policy" });
  });

  it("the key's rule decides before the session's: its deny holds where the session's rule would ask", async () => {
    mock.script(bash("rm -rf y"), { blocks: [{ type: "text", text: "could not" }] });
    const key = await keyWith([
      { tool: "Bash", command: "rm *", decision: "deny", reason: "the key forbids rm" },
    ]);
    const { sse } = await run(key, [{ tool: "Bash", decision: "ask" }], "remove y");
    const frames = await sse.until("completion");
    expect(frames.filter((f) => f.event === "permission_request")).toEqual([]);
    expect(frames.filter((f) => f.event === "tool_rule").map((f) => data(f))).toEqual([
      expect.objectContaining({ decision: "deny", source: "key", rule_index: 0 }),
    ]);
    expect(toolResultText(mock.mainRequests().at(-1))).toContain("the key forbids rm");
  });
});
