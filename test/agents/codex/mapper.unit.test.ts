import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { CodexMapper, type CodexUsageTotals } from "../../../src/agents/codex/mapper.js";
import type { BridgeEvent } from "../../../src/events.js";

// Fixtures are the exact stdout of the real codex 0.171.0 against test/support/mock-openai.ts
// (see test/fixtures/codex/README.md; rewritten by real-cli.test.ts with UPDATE_FIXTURES=1).

type Json = Record<string, unknown>;

const FIXTURES = resolve(import.meta.dirname, "../../fixtures/codex");

function fixture(name: string): Json[] {
  return readFileSync(join(FIXTURES, `${name}.jsonl`), "utf8")
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l) as Json);
}

/** The turn's events: all but the session_status that thread.started gives (tested on its own). */
function mapAll(lines: Json[], mapper = new CodexMapper()): BridgeEvent[] {
  return lines.flatMap((l) => mapper.push(l)).filter((e) => e.type !== "session_status");
}

const ofType = <T extends BridgeEvent["type"]>(events: BridgeEvent[], type: T) =>
  events.filter((e): e is Extract<BridgeEvent, { type: T }> => e.type === type);

const THREAD = "01a22ed8-0000-7000-8000-000000000001";
const started = { type: "thread.started", thread_id: THREAD };
const turnStarted = { type: "turn.started" };
const item = (type: "item.started" | "item.updated" | "item.completed", fields: Json) => ({
  type,
  item: fields,
});
const completed = (usage: Partial<CodexUsageTotals> = {}) => ({
  type: "turn.completed",
  usage: {
    input_tokens: 100,
    cached_input_tokens: 0,
    cache_write_input_tokens: 0,
    output_tokens: 20,
    reasoning_output_tokens: 0,
    ...usage,
  },
});

describe("CodexMapper on the real CLI's output", () => {
  it("maps reasoning and the agent message to reasoning and text_delta, and turn.completed to the completion", () => {
    const lines = fixture("text");
    const mapper = new CodexMapper({ elapsedMs: () => 321 });
    const events = mapAll(lines, mapper);
    expect(events).toEqual([
      { type: "reasoning", text: "The user wants a greeting." },
      { type: "text_delta", text: "Hello there, from the mock." },
      {
        type: "completion",
        status: "succeeded",
        is_error: false,
        result: "Hello there, from the mock.",
        error: null,
        cost_usd: null,
        duration_ms: 321,
        // OpenAI counts cached tokens inside input_tokens (1200 of which 800 cached).
        usage: {
          input_tokens: 400,
          output_tokens: 45,
          cache_read_tokens: 800,
          cache_creation_tokens: 0,
          num_turns: 1,
          duration_api_ms: 0,
        },
        agent_session_id: lines[0]?.thread_id,
        claude_session_id: null,
        resume_at: null,
        last_message_uuid: null,
      },
    ]);
    expect(mapper.done).toBe(true);
    expect(mapper.threadId).toBe(lines[0]?.thread_id);
  });

  it("shows a command as status and a shell_exec tool_call when it starts, and its output and exit code when it ends", () => {
    const events = mapAll(fixture("shell"));
    expect(events.map((e) => e.type)).toEqual([
      "status",
      "tool_call",
      "tool_result",
      "tool_update",
      "text_delta",
      "completion",
    ]);
    expect(events.slice(0, 4)).toEqual([
      { type: "status", message: "Using shell…", tool_name: "shell", tool_use_id: "item_0" },
      {
        type: "tool_call",
        tool_use_id: "item_0",
        tool_name: "shell",
        kind: "shell_exec",
        normalized: { kind: "shell_exec", command: "/bin/bash -lc 'echo hi'", background: false },
        input: { command: "/bin/bash -lc 'echo hi'" },
      },
      {
        type: "tool_result",
        tool_use_id: "item_0",
        is_error: false,
        content: "hi\n",
        truncated: false,
      },
      {
        type: "tool_update",
        tool_use_id: "item_0",
        status: "complete",
        normalized: { kind: "shell_exec", exit_code: 0, output: "hi\n" },
      },
    ]);
  });

  it("ends a command that exited non-zero with status error and its exit code", () => {
    const command = { id: "c1", type: "command_execution", command: "false" };
    const events = mapAll([
      item("item.started", {
        ...command,
        aggregated_output: "",
        exit_code: null,
        status: "in_progress",
      }),
      item("item.completed", {
        ...command,
        aggregated_output: "oops\n",
        exit_code: 1,
        status: "failed",
      }),
    ]);
    expect(ofType(events, "tool_update")).toEqual([
      {
        type: "tool_update",
        tool_use_id: "c1",
        status: "error",
        normalized: { kind: "shell_exec", exit_code: 1, output: "oops\n" },
      },
    ]);
  });

  it("closes at turn.completed a call whose item never completed", () => {
    const events = mapAll([
      item("item.started", {
        id: "c1",
        type: "command_execution",
        command: "sleep 9",
        status: "in_progress",
      }),
      { type: "turn.completed", usage: {} },
    ]);
    expect(events.map((e) => e.type)).toEqual(["status", "tool_call", "tool_update", "completion"]);
    expect(ofType(events, "tool_update")[0]).toMatchObject({
      status: "complete",
      normalized: { kind: "shell_exec", exit_code: null },
    });
  });

  it("shows a file change as a modify_file apply_patch tool_call listing the changed paths", () => {
    const lines = fixture("file-change");
    const events = mapAll(lines);
    const first = lines[2]?.item as { changes: Array<{ path: string }> } | undefined;
    const changes = first?.changes ?? [];
    expect(changes[0]?.path).toMatch(/\/hello\.txt$/);
    expect(ofType(events, "tool_call")).toEqual([
      {
        type: "tool_call",
        tool_use_id: "item_0",
        tool_name: "apply_patch",
        kind: "modify_file",
        normalized: {
          kind: "modify_file",
          changes: [{ file_path: changes[0]?.path, operation: "create" }],
        },
        input: { changes },
      },
    ]);
    expect(ofType(events, "tool_result")).toEqual([
      {
        type: "tool_result",
        tool_use_id: "item_0",
        is_error: false,
        content: `add ${changes[0]?.path}`,
        truncated: false,
      },
    ]);
  });

  it("turns turn.failed into a failed completion whose error is the message inside the API's JSON body", () => {
    const events = mapAll(fixture("api-error-400"));
    expect(events).toEqual([
      expect.objectContaining({
        type: "completion",
        status: "failed",
        is_error: true,
        result: null,
        error: "mock failure: bad request",
        error_code: "agent_error",
        cost_usd: null,
        usage: expect.objectContaining({ input_tokens: 0, output_tokens: 0, num_turns: 1 }),
      }),
    ]);
  });

  it("reports an API 401 as agent_not_authenticated, saying what to set", () => {
    const [completion] = mapAll(fixture("api-error-401"));
    expect(completion).toMatchObject({ status: "failed", error_code: "agent_not_authenticated" });
    expect(completion?.type === "completion" && completion.error).toMatch(
      /^the codex CLI has no valid credentials: set OPENAI_API_KEY .*\(codex said: unexpected status 401 Unauthorized: Incorrect API key provided/,
    );
  });

  it("counts only a resumed run's own usage: codex's totals minus the previous run's", () => {
    const first = new CodexMapper();
    mapAll(fixture("resume-1"), first);
    expect(first.usageTotals).toMatchObject({
      input_tokens: 100,
      cached_input_tokens: 10,
      output_tokens: 20,
    });
    const second = new CodexMapper({ previousTotals: first.usageTotals });
    const [completion] = ofType(mapAll(fixture("resume-2"), second), "completion");
    expect(completion?.usage).toMatchObject({
      input_tokens: 250,
      cache_read_tokens: 50,
      output_tokens: 30,
    });
    expect(second.usageTotals).toMatchObject({
      input_tokens: 400,
      cached_input_tokens: 60,
      output_tokens: 50,
    });
    expect(completion?.agent_session_id).toBe(first.threadId);
  });

  it("produces nothing for a run killed mid-turn, and failure() closes it with the thread id", () => {
    const lines = fixture("sigterm");
    const mapper = new CodexMapper();
    expect(mapAll(lines, mapper)).toEqual([]);
    expect(mapper.done).toBe(false);
    expect(mapper.failure("timed_out", "timed out after 5s", "timed_out", 5000.4)).toEqual({
      type: "completion",
      status: "timed_out",
      is_error: true,
      result: null,
      error: "timed out after 5s",
      error_code: "timed_out",
      cost_usd: null,
      duration_ms: 5000,
      usage: {
        input_tokens: 0,
        output_tokens: 0,
        cache_read_tokens: 0,
        cache_creation_tokens: 0,
        num_turns: 0,
        duration_api_ms: 0,
      },
      agent_session_id: lines[0]?.thread_id,
      claude_session_id: null,
      resume_at: null,
      last_message_uuid: null,
    });
    expect(mapper.done).toBe(true);
  });
});

describe("CodexMapper on other item types", () => {
  it("marks a command that exited non-zero, failed or was declined as an error result", () => {
    const command = (id: string, status: string, exit_code: number | null) =>
      item("item.completed", {
        id,
        type: "command_execution",
        command: "false",
        aggregated_output: "",
        exit_code,
        status,
      });
    const results = ofType(
      mapAll([
        command("a", "completed", 0),
        command("b", "failed", 1),
        command("c", "declined", null),
      ]),
      "tool_result",
    );
    expect(results.map((r) => [r.tool_use_id, r.is_error])).toEqual([
      ["a", false],
      ["b", true],
      ["c", true],
    ]);
  });

  it("emits status and tool_call once per item, from whichever of its lines comes first", () => {
    const running = {
      id: "cmd",
      type: "command_execution",
      command: "ls",
      aggregated_output: "",
      exit_code: null,
      status: "in_progress",
    };
    const events = mapAll([
      item("item.started", running),
      item("item.updated", running),
      item("item.completed", {
        ...running,
        aggregated_output: "a\n",
        exit_code: 0,
        status: "completed",
      }),
      item("item.completed", {
        ...running,
        aggregated_output: "a\n",
        exit_code: 0,
        status: "completed",
      }),
    ]);
    expect(events.map((e) => e.type)).toEqual([
      "status",
      "tool_call",
      "tool_result",
      "tool_update",
    ]);
  });

  it("names an MCP tool call mcp__<server>__<tool>, with its arguments as input and its text content as result and output", () => {
    const call = {
      id: "m1",
      type: "mcp_tool_call",
      server: "docs",
      tool: "lookup",
      arguments: { q: "x" },
      result: null,
      error: null,
      status: "in_progress",
    };
    const events = mapAll([
      item("item.started", call),
      item("item.completed", {
        ...call,
        result: {
          content: [
            { type: "text", text: "found" },
            { type: "image", data: "…" },
          ],
          structured_content: null,
        },
        status: "completed",
      }),
      item("item.completed", {
        ...call,
        id: "m2",
        error: { message: "server gone" },
        status: "failed",
      }),
    ]);
    expect(events).toEqual([
      {
        type: "status",
        message: "Using mcp__docs__lookup…",
        tool_name: "mcp__docs__lookup",
        tool_use_id: "m1",
      },
      {
        type: "tool_call",
        tool_use_id: "m1",
        tool_name: "mcp__docs__lookup",
        kind: "generic",
        normalized: { kind: "generic" },
        input: { q: "x" },
      },
      {
        type: "tool_result",
        tool_use_id: "m1",
        is_error: false,
        content: "found\n[image]",
        truncated: false,
      },
      {
        type: "tool_update",
        tool_use_id: "m1",
        status: "complete",
        normalized: { kind: "generic", output: "found\n[image]" },
      },
      {
        type: "status",
        message: "Using mcp__docs__lookup…",
        tool_name: "mcp__docs__lookup",
        tool_use_id: "m2",
      },
      {
        type: "tool_call",
        tool_use_id: "m2",
        tool_name: "mcp__docs__lookup",
        kind: "generic",
        normalized: { kind: "generic" },
        input: { q: "x" },
      },
      {
        type: "tool_result",
        tool_use_id: "m2",
        is_error: true,
        content: "server gone",
        truncated: false,
      },
      {
        type: "tool_update",
        tool_use_id: "m2",
        status: "error",
        normalized: { kind: "generic", output: "server gone" },
      },
    ]);
  });

  it("shows a web search and a to-do list as http_request and manage_todos calls with no result", () => {
    const search = {
      id: "w1",
      type: "web_search",
      query: "vitest",
      action: { type: "search", query: "vitest" },
    };
    const todo = {
      id: "t1",
      type: "todo_list",
      items: [{ text: "write tests", completed: false }],
    };
    const events = mapAll([
      item("item.started", search),
      item("item.completed", search),
      item("item.started", todo),
      item("item.updated", { ...todo, items: [{ text: "write tests", completed: true }] }),
      item("item.completed", todo),
    ]);
    expect(ofType(events, "tool_call")).toEqual([
      {
        type: "tool_call",
        tool_use_id: "w1",
        tool_name: "web_search",
        kind: "http_request",
        normalized: { kind: "http_request", query: "vitest" },
        input: { query: "vitest", action: search.action },
      },
      {
        type: "tool_call",
        tool_use_id: "t1",
        tool_name: "todo_list",
        kind: "manage_todos",
        normalized: {
          kind: "manage_todos",
          todos: [{ content: "write tests", status: "pending" }],
        },
        input: { items: todo.items },
      },
    ]);
    expect(ofType(events, "tool_result")).toEqual([]);
    expect(ofType(events, "tool_update").map((e) => [e.tool_use_id, e.status])).toEqual([
      ["w1", "complete"],
      ["t1", "complete"],
    ]);
  });

  it("starts a thread's run with session_status: new, with the thread id; resumed after exec resume", () => {
    const fresh = new CodexMapper().push(started);
    expect(fresh).toEqual([
      { type: "session_status", status: "new", agent_session_id: THREAD, model: null },
    ]);
    const resumed = new CodexMapper({ resumed: true });
    expect(resumed.push(started)).toMatchObject([{ status: "resumed" }]);
    // codex says thread.started once; a second one is not a second start.
    expect(resumed.push(started)).toEqual([]);
  });

  it("joins separate agent messages with a blank line, not glued together", () => {
    const message = (id: string, text: string) =>
      item("item.completed", { id, type: "agent_message", text });
    const events = mapAll([
      started,
      message("item_0", "Writing the file."),
      item("item.completed", { id: "item_1", type: "reasoning", text: "then" }),
      message("item_2", "Done."),
    ]);
    expect(ofType(events, "text_delta").map((e) => e.text)).toEqual([
      "Writing the file.",
      "\n\nDone.",
    ]);
  });

  it("passes over an error item (a warning codex carried on after) and unknown lines", () => {
    const events = mapAll([
      started,
      item("item.completed", {
        id: "item_0",
        type: "error",
        message: "Model metadata for `x` not found.",
      }),
      { type: "item.plan.delta", item_id: "p", delta: "…" },
      { type: "something.new" },
      turnStarted,
      item("item.completed", { id: "item_1", type: "agent_message", text: "Fine." }),
      completed(),
    ]);
    expect(events.map((e) => e.type)).toEqual(["text_delta", "completion"]);
    expect(ofType(events, "completion")[0]).toMatchObject({ status: "succeeded", result: "Fine." });
  });

  it("cuts a long command output to the bound and marks it truncated", () => {
    const [result] = ofType(
      mapAll(
        [
          item("item.completed", {
            id: "x",
            type: "command_execution",
            command: "yes",
            aggregated_output: "y\n".repeat(100),
            exit_code: 0,
            status: "completed",
          }),
        ],
        new CodexMapper({ maxToolResultChars: 10 }),
      ),
      "tool_result",
    );
    expect(result).toMatchObject({ content: "y\ny\ny\ny\ny\n", truncated: true });
  });
});

describe("CodexMapper completions", () => {
  it("prices a run's own tokens when a price is given, cached input at its own rate", () => {
    const mapper = new CodexMapper({
      price: { input: 2, cache_read: 0.5, output: 8, cache_creation: 2 },
    });
    const [completion] = mapAll(
      [
        started,
        completed({
          input_tokens: 1_000_000,
          cached_input_tokens: 400_000,
          output_tokens: 100_000,
        }),
      ],
      mapper,
    );
    // 600k uncached × $2 + 400k cached × $0.5 + 100k output × $8, per million.
    expect(completion).toMatchObject({ type: "completion", cost_usd: 1.2 + 0.2 + 0.8 });
  });

  it("takes the totals as the run's own when they are below the previous totals (not this thread's baseline)", () => {
    const mapper = new CodexMapper({
      previousTotals: {
        input_tokens: 5000,
        cached_input_tokens: 0,
        cache_write_input_tokens: 0,
        output_tokens: 900,
        reasoning_output_tokens: 0,
      },
    });
    const [completion] = mapAll(
      [started, completed({ input_tokens: 100, output_tokens: 20 })],
      mapper,
    );
    expect(completion?.type === "completion" && completion.usage).toMatchObject({
      input_tokens: 100,
      output_tokens: 20,
    });
  });

  it("reports a missing OPENAI_API_KEY as agent_not_authenticated", () => {
    const message = "Missing environment variable: `OPENAI_API_KEY`.";
    const [completion] = mapAll([
      started,
      turnStarted,
      { type: "error", message },
      { type: "turn.failed", error: { message } },
    ]);
    expect(completion).toMatchObject({ status: "failed", error_code: "agent_not_authenticated" });
  });

  it("adds what codex last said in an error line to the failure of a run that ended without a turn result", () => {
    const mapper = new CodexMapper();
    mapAll(
      [started, turnStarted, { type: "error", message: '{"error":{"message":"stream broke"}}' }],
      mapper,
    );
    expect(mapper.failure("failed", "codex exited with code 1", "agent_exited", 10).error).toBe(
      "codex exited with code 1 (codex said: stream broke)",
    );
  });

  it("ignores every line after the completion, and counts dropped lines in it", () => {
    const mapper = new CodexMapper();
    mapper.push(started);
    mapper.lineDropped();
    mapper.lineDropped();
    const [completion] = mapper.push(completed());
    expect(completion).toMatchObject({ type: "completion", dropped_lines: 2 });
    expect(
      mapper.push(item("item.completed", { id: "late", type: "agent_message", text: "late" })),
    ).toEqual([]);
    expect(mapper.push(completed())).toEqual([]);
  });
});
