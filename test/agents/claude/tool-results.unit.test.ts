import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { StreamMapper } from "../../../src/agents/claude/mapper.js";
import { toolOutcome } from "../../../src/agents/claude/tools.js";
import type { BridgeEvent } from "../../../src/events.js";

// Claude Code's tool results as `tool_update` payloads, from the real CLI's lines
// (test/fixtures/stream-json/tool-results.ndjson, recorded by tool-results.real.test.ts), and
// from their text alone where a line has no structured result.

type Json = Record<string, unknown>;
const FIXTURE = resolve(import.meta.dirname, "../../fixtures/stream-json/tool-results.ndjson");
const lines = readFileSync(FIXTURE, "utf8")
  .split("\n")
  .filter((l) => l.trim())
  .map((l) => JSON.parse(l) as Json);
const init = lines.find((l) => l.type === "system" && l.subtype === "init") as Json;
const cwd = init.cwd as string;

function events(max?: number): BridgeEvent[] {
  const mapper = new StreamMapper(max === undefined ? {} : { maxToolResultChars: max });
  return lines.flatMap((l) => mapper.push(l));
}
const all = events();
function update(id: string, from = all): Json | undefined {
  for (const e of from) if (e.type === "tool_update" && e.tool_use_id === id) return e.normalized;
  return undefined;
}
function call(id: string): Json | undefined {
  for (const e of all) if (e.type === "tool_call" && e.tool_use_id === id) return e.normalized;
  return undefined;
}

describe("tool results of the real CLI as tool_update payloads", () => {
  it("gives a Read's text without line numbers, its file, first line, line count and the file's lines", () => {
    expect(update("toolu_read")).toEqual({
      kind: "read_file",
      file_path: join(cwd, "notes.txt"),
      content: "alpha\nbeta\ngamma\ndelta\n",
      start_line: 1,
      line_count: 5,
      total_lines: 5,
    });
    expect(update("toolu_read_part")).toMatchObject({
      content: "beta\ngamma",
      start_line: 2,
      line_count: 2,
    });
  });

  it("gives a Grep's and a Glob's files and counts, and a Grep's lines in its content and count modes", () => {
    expect(update("toolu_grep")).toEqual({
      kind: "code_search",
      files: ["b.txt", "notes.txt"],
      file_count: 2,
    });
    expect(update("toolu_glob")).toEqual({
      kind: "code_search",
      files: ["b.txt", "notes.txt"],
      file_count: 2,
    });
    expect(update("toolu_grep_content")).toEqual({
      kind: "code_search",
      output: "b.txt:1:beta two\nnotes.txt:2:beta",
    });
    expect(update("toolu_grep_count")).toEqual({
      kind: "code_search",
      file_count: 2,
      match_count: 2,
      output: "b.txt:1\nnotes.txt:1",
    });
  });

  it("gives a Bash call the CLI's work dir, from its init line", () => {
    expect(call("toolu_bash")).toEqual({
      kind: "shell_exec",
      command: "pwd",
      work_dir: cwd,
      background: false,
    });
    expect(update("toolu_bash")).toMatchObject({ exit_code: 0, stdout: cwd });
  });

  it("gives a WebFetch's status, URL and response, and a WebSearch's response", () => {
    expect(update("toolu_fetch")).toEqual({
      kind: "http_request",
      url: expect.stringMatching(/^https:\/\/127\.0\.0\.1:\d+\/page$/),
      status_code: 200,
      status_text: "OK",
      response: "Mock side answer",
    });
    expect(update("toolu_search")).toEqual({
      kind: "http_request",
      response: expect.stringMatching(/^Web search results for query: "hello"\n/),
    });
  });

  it("gives a created task's id, a task list, and another tool's output; a call that failed says nothing more", () => {
    expect(update("toolu_task")).toEqual({ kind: "create_task", task_id: "1" });
    expect(update("toolu_tasks")).toEqual({
      kind: "manage_todos",
      tasks: [{ id: "1", subject: "Write notes", status: "pending" }],
    });
    expect(update("toolu_cron")).toEqual({ kind: "generic", output: "No scheduled jobs." });
    // TodoWrite does not exist in this CLI: its call failed, with no list to show.
    expect(update("toolu_todo")).toEqual({ kind: "manage_todos" });
  });

  it("says truncated when a Glob stopped at its first 100 files (its result's own flag)", () => {
    const structured = { filenames: ["a.ts"], numFiles: 100, truncated: true };
    expect(toolOutcome("Glob", { isError: false, text: "a.ts", structured }, 16_384)).toEqual({
      kind: "code_search",
      files: ["a.ts"],
      file_count: 100,
      truncated: true,
    });
  });

  it("cuts what it gives to the bound, and says so", () => {
    const small = events(6);
    expect(update("toolu_read", small)).toMatchObject({
      content: "alpha\n",
      truncated: true,
    });
    // A list is cut as a whole: the files that fit.
    expect(update("toolu_grep", small)).toEqual({
      kind: "code_search",
      files: ["b.txt"],
      file_count: 2,
      truncated: true,
    });
  });
});

describe("tool results without a structured result", () => {
  const outcome = (name: string, text: string, isError = false) =>
    toolOutcome(name, { isError, text, structured: undefined }, 16_384);

  it("reads a Read's text from its numbered lines, and nothing from another text", () => {
    expect(outcome("Read", "2\tbeta\n3\tgamma")).toEqual({
      kind: "read_file",
      content: "beta\ngamma",
      start_line: 2,
      line_count: 2,
    });
    expect(
      outcome("Read", "<system-reminder>Warning: the file is empty</system-reminder>"),
    ).toEqual({ kind: "read_file" });
    expect(outcome("Read", "File does not exist.", true)).toEqual({ kind: "read_file" });
  });

  it("reads a Grep's and a Glob's files from their text", () => {
    expect(outcome("Grep", "Found 2 files\nb.txt\nnotes.txt")).toEqual({
      kind: "code_search",
      files: ["b.txt", "notes.txt"],
      file_count: 2,
    });
    expect(outcome("Glob", "No files found")).toEqual({
      kind: "code_search",
      files: [],
      file_count: 0,
    });
    expect(outcome("Grep", "b.txt:1:beta two")).toEqual({ kind: "code_search" });
  });
});
