import { randomUUID } from "node:crypto";
import { mkdir, utimes, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { runClaude } from "../../../src/agents/claude/runner.js";
import type { BridgeEvent } from "../../../src/events.js";
import { BRIDGE_FLAGS, CLAUDE_BIN, makeClaudeEnv, runCli } from "../../support/claude-env.js";
import { type Cleanups, undo } from "../../support/cleanups.js";
import { startHttpsPage } from "../../support/https-page.js";
import { type MockTurn, startMockAnthropic } from "../../support/mock-anthropic.js";

// What the real `claude` (2.1.328) says of its tools' results, against the mock Messages API:
// the lines behind test/fixtures/stream-json/tool-results.ndjson (rewritten with
// UPDATE_FIXTURES=1), and the full view's events made of them. CLI 2.1.328 offers Grep and Glob
// only when `--allowedTools` names them (else it searches through Bash), and TodoWrite not at all.

const FIXTURES = resolve(import.meta.dirname, "../../fixtures/stream-json");
const UPDATE = process.env.UPDATE_FIXTURES === "1";

const cleanups: Cleanups = [];
afterEach(async () => {
  await undo(cleanups);
});

const use = (id: string, name: string, input: Record<string, unknown>): MockTurn => ({
  blocks: [{ type: "tool_use", id, name, input }],
});

async function setup() {
  const mock = await startMockAnthropic({ quiet: true });
  const ce = await makeClaudeEnv(mock.url);
  cleanups.push(
    () => mock.close(),
    () => ce.cleanup(),
  );
  await writeFile(join(ce.cwd, "notes.txt"), "alpha\nbeta\ngamma\ndelta\n");
  await writeFile(join(ce.cwd, "b.txt"), "beta two\n");
  // Grep lists the newest first and Glob the oldest: with one time, both fall back on the name.
  const at = new Date("2026-01-01T00:00:00Z");
  await utimes(join(ce.cwd, "notes.txt"), at, at);
  await utimes(join(ce.cwd, "b.txt"), at, at);
  return { mock, ce, file: join(ce.cwd, "notes.txt") };
}

type Json = Record<string, unknown>;
const toolUseResult = (lines: Json[], id: string) =>
  lines.find(
    (l) =>
      l.type === "user" &&
      JSON.stringify((l.message as Json | undefined)?.content).includes(`"tool_use_id":"${id}"`),
  )?.tool_use_result;

describe("Claude Code's tool results with the real CLI", () => {
  it("carries each tool's result data in the user line's tool_use_result (the fixture's lines)", async () => {
    const { mock, ce, file } = await setup();
    const page = await startHttpsPage("The page says hello.");
    cleanups.push(() => page.close());
    // Else the CLI first asks claude.ai whether the domain may be fetched.
    await mkdir(join(ce.home, ".claude"));
    await writeFile(
      join(ce.home, ".claude", "settings.json"),
      JSON.stringify({ skipWebFetchPreflight: true }),
    );
    mock.script(
      use("toolu_read", "Read", { file_path: file }),
      use("toolu_read_part", "Read", { file_path: file, offset: 2, limit: 2 }),
      use("toolu_grep", "Grep", { pattern: "beta" }),
      use("toolu_grep_content", "Grep", { pattern: "beta", output_mode: "content", "-n": true }),
      use("toolu_grep_count", "Grep", { pattern: "beta", output_mode: "count" }),
      use("toolu_glob", "Glob", { pattern: "*.txt" }),
      use("toolu_bash", "Bash", { command: "pwd" }),
      use("toolu_fetch", "WebFetch", { url: page.url, prompt: "What does it say?" }),
      use("toolu_task", "TaskCreate", { subject: "Write notes", description: "All of them" }),
      use("toolu_tasks", "TaskList", {}),
      use("toolu_todo", "TodoWrite", { todos: [{ content: "a", status: "pending" }] }),
      use("toolu_cron", "CronList", {}),
      use("toolu_search", "WebSearch", { query: "hello" }),
      // The search's own request to the model (the mock takes it for the next turn) gets this.
      { blocks: [{ type: "text", text: "Hello is a greeting." }] },
      { blocks: [{ type: "text", text: "Done." }] },
    );
    const run = await runCli(
      { ...ce, env: { ...ce.env, NODE_EXTRA_CA_CERTS: page.cert } },
      {
        args: [
          ...BRIDGE_FLAGS,
          "--session-id",
          randomUUID(),
          "--permission-mode",
          "bypassPermissions",
          "--allowedTools=Grep",
          "--allowedTools=Glob",
          "--allowedTools=TodoWrite",
        ],
        prompt: "Look around",
      },
    );
    if (UPDATE) await writeFile(join(FIXTURES, "tool-results.ndjson"), run.stdout);
    const lines = run.lines as Json[];
    expect(toolUseResult(lines, "toolu_read")).toEqual({
      type: "text",
      file: {
        filePath: file,
        content: "alpha\nbeta\ngamma\ndelta\n",
        numLines: 5,
        startLine: 1,
        totalLines: 5,
      },
    });
    expect(toolUseResult(lines, "toolu_grep")).toEqual({
      mode: "files_with_matches",
      filenames: ["b.txt", "notes.txt"],
      numFiles: 2,
      totalFiles: 2,
    });
    expect(toolUseResult(lines, "toolu_glob")).toMatchObject({
      filenames: ["b.txt", "notes.txt"],
      numFiles: 2,
      truncated: false,
    });
    expect(toolUseResult(lines, "toolu_fetch")).toMatchObject({
      code: 200,
      codeText: "OK",
      result: "Mock side answer",
      url: page.url,
    });
    expect(toolUseResult(lines, "toolu_task")).toEqual({
      task: { id: "1", subject: "Write notes", description: "All of them" },
    });
    expect(toolUseResult(lines, "toolu_tasks")).toEqual({
      tasks: [{ id: "1", subject: "Write notes", status: "pending", blockedBy: [] }],
    });
    expect(toolUseResult(lines, "toolu_search")).toMatchObject({
      query: "hello",
      results: ["Hello is a greeting."],
    });
    // TodoWrite is not among its tools whatever --allowedTools says (the task tools replace it).
    expect(toolUseResult(lines, "toolu_todo")).toMatch(/^Error: No such tool available: TodoWrite/);
  });

  it("shows a Read's text, a Grep's files and a Bash command's work dir in the full view's events", async () => {
    const { mock, ce, file } = await setup();
    mock.script(
      use("toolu_read", "Read", { file_path: file, offset: 2, limit: 2 }),
      use("toolu_grep", "Grep", { pattern: "beta" }),
      use("toolu_bash", "Bash", { command: "pwd", description: "Where" }),
      { blocks: [{ type: "text", text: "Done." }] },
    );
    const events: BridgeEvent[] = [];
    const request = {
      prompt: "Look around",
      claudeSessionId: randomUUID(),
      resume: false,
      permissionMode: "bypassPermissions" as const,
      cwd: ce.cwd,
      allowedTools: ["Grep"],
    };
    const config = {
      bin: CLAUDE_BIN,
      env: ce.env,
      timeoutMs: 45_000,
      idleTimeoutMs: 30_000,
      maxLineBytes: 16 * 1024 * 1024,
      stderrTailBytes: 64 * 1024,
      killGraceMs: 2000,
    };
    for await (const batch of runClaude(request, config)) events.push(...batch);
    expect(events.at(-1)).toMatchObject({ type: "completion", status: "succeeded" });
    const of = <T extends BridgeEvent["type"]>(type: T, id: string) =>
      events.find(
        (e): e is Extract<BridgeEvent, { type: T }> =>
          e.type === type && "tool_use_id" in e && e.tool_use_id === id,
      );
    expect(of("tool_result", "toolu_read")?.content).toBe("2\tbeta\n3\tgamma");
    expect(of("tool_update", "toolu_read")?.normalized).toEqual({
      kind: "read_file",
      file_path: file,
      content: "beta\ngamma",
      start_line: 2,
      line_count: 2,
      total_lines: 5,
    });
    expect(of("tool_result", "toolu_grep")?.content).toBe("Found 2 files\nb.txt\nnotes.txt");
    expect(of("tool_update", "toolu_grep")?.normalized).toEqual({
      kind: "code_search",
      files: ["b.txt", "notes.txt"],
      file_count: 2,
    });
    expect(of("tool_call", "toolu_bash")?.normalized).toEqual({
      kind: "shell_exec",
      command: "pwd",
      work_dir: ce.cwd,
      description: "Where",
      background: false,
    });
    // The command ran where the call says.
    expect(of("tool_update", "toolu_bash")?.normalized).toMatchObject({ stdout: ce.cwd });
  });
});
