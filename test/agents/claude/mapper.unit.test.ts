import { readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { StreamMapper } from "../../../src/agents/claude/mapper.js";
import { parseQuestions } from "../../../src/agents/claude/tools.js";
import { ownApiMs } from "../../../src/agents/claude/usage.js";
import { BridgeEvent } from "../../../src/events.js";
import {
  assistant,
  messageStart,
  QUESTION_INPUT,
  result,
  SESSION_ID,
  streamEvent,
  streamedText,
  systemInit,
  textDelta,
  thinkingDelta,
  toolResult,
  toolUse,
  toolUseStart,
} from "../../support/stream-json-lines.js";

type Json = Record<string, unknown>;

function mapAll(lines: Json[], mapper = new StreamMapper()): BridgeEvent[] {
  return lines.flatMap((l) => mapper.push(l));
}

const texts = (events: BridgeEvent[]) =>
  events.flatMap((e) => (e.type === "text_delta" ? [e.text] : []));

describe("StreamMapper: text", () => {
  it("emits each partial text delta as a text_delta, and the repeated whole block adds nothing", () => {
    const events = mapAll([...streamedText("m1", ["Hel", "lo ", "world"])]);
    expect(events.filter((e) => e.type !== "context_window")).toEqual([
      { type: "text_delta", text: "Hel" },
      { type: "text_delta", text: "lo " },
      { type: "text_delta", text: "world" },
    ]);
  });

  it("emits the whole text block when no partial deltas came for it", () => {
    const events = mapAll([assistant("m1", [{ type: "text", text: "All at once." }])]);
    expect(events).toEqual([{ type: "text_delta", text: "All at once." }]);
  });

  it("emits only the missing end when the deltas stopped short of the block", () => {
    const events = mapAll([
      messageStart("m1"),
      textDelta("m1", 0, "Hello"),
      assistant("m1", [{ type: "text", text: "Hello world" }]),
    ]);
    expect(texts(events)).toEqual(["Hello", " world"]);
  });

  it("never repeats text when deltas and block disagree", () => {
    const events = mapAll([
      messageStart("m1"),
      textDelta("m1", 0, "Hi there"),
      assistant("m1", [{ type: "text", text: "Something else" }]),
    ]);
    expect(texts(events)).toEqual(["Hi there"]);
  });

  it("matches several text blocks of one message in order (blocks after all deltas)", () => {
    const events = mapAll([
      messageStart("m1"),
      textDelta("m1", 0, "First. "),
      textDelta("m1", 2, "Second."),
      assistant("m1", [
        { type: "text", text: "First. " },
        toolUse("t1", "Read", { file_path: "/a" }),
        { type: "text", text: "Second." },
      ]),
    ]);
    expect(texts(events)).toEqual(["First. ", "Second."]);
  });

  it("keeps messages apart: a streamed message does not swallow the next, unstreamed one", () => {
    const events = mapAll([
      ...streamedText("m1", ["Same text"]),
      assistant("m2", [{ type: "text", text: "Same text" }]),
    ]);
    expect(texts(events)).toEqual(["Same text", "\n\nSame text"]);
  });

  it("joins the main thread's separate messages with a blank line, not glued together", () => {
    const events = mapAll([
      ...streamedText("m1", ["Writing ", "the file."]),
      assistant("m1", [toolUse("t1", "Write", { file_path: "/a", content: "x" })]),
      toolResult("t1", "ok"),
      ...streamedText("m2", ["Done", "."]),
      // A message that already ends its line needs one line break more, one that ends a
      // paragraph none.
      ...streamedText("m3", ["Line\n"]),
      ...streamedText("m4", ["Next.\n\n"]),
      ...streamedText("m5", ["Last."]),
    ]);
    expect(texts(events).join("")).toBe("Writing the file.\n\nDone.\n\nLine\n\nNext.\n\nLast.");
    // The separator comes with the new message's first text, not after the last message.
    expect(texts(events)).toContain("\n\nDone");
  });

  it("keeps a subagent's text out of text_delta: a subagent_text_delta naming its parent call", () => {
    const sub = { parent: "toolu_task" };
    const events = mapAll([
      ...streamedText("m1", ["Delegating."]),
      assistant("s1", [{ type: "text", text: "Secret notes." }], sub),
      assistant("s2", [{ type: "text", text: "More notes." }], sub),
      ...streamedText("m2", ["The answer."]),
    ]);
    expect(texts(events)).toEqual(["Delegating.", "\n\nThe answer."]);
    expect(events.filter((e) => e.type === "subagent_text_delta")).toEqual([
      { type: "subagent_text_delta", text: "Secret notes.", parent_tool_use_id: "toolu_task" },
      // A subagent's messages are paragraphs of its own text.
      { type: "subagent_text_delta", text: "\n\nMore notes.", parent_tool_use_id: "toolu_task" },
    ]);
  });

  it("emits the result's text once as text_delta when the run said nothing else (a slash command)", () => {
    const [only, completion] = mapAll([
      systemInit(),
      result({ result: "Total cost: $0.01" }),
    ]).filter((e) => e.type === "text_delta" || e.type === "completion");
    expect(only).toEqual({ type: "text_delta", text: "Total cost: $0.01" });
    expect(completion).toMatchObject({ type: "completion", result: "Total cost: $0.01" });
    // Text already streamed is not repeated, and a failed result's text is its error.
    const streamed = mapAll([...streamedText("m1", ["Hi."]), result({ result: "Hi." })]);
    expect(texts(streamed)).toEqual(["Hi."]);
    const failed = mapAll([result({ is_error: true, result: "API Error: 500" })]);
    expect(texts(failed)).toEqual([]);
  });

  it("emits a local command's output, which the CLI replays as a user line (/compact), as text", () => {
    const replay = (content: string) => ({
      type: "user",
      message: { role: "user", content },
      parent_tool_use_id: null,
      session_id: SESSION_ID,
      uuid: "r1",
      isReplay: true,
    });
    const events = mapAll([
      replay("<local-command-stdout>Compacted </local-command-stdout>"),
      result({ result: "" }),
    ]);
    expect(texts(events)).toEqual(["Compacted"]);
    // Other string-content user lines (the compact summary, the prompt) are not the agent's text.
    expect(
      mapAll([{ ...replay("This session is being continued…"), isReplay: undefined }]),
    ).toEqual([]);
  });

  it("does not emit the synthetic text of an API error message (the completion carries it)", () => {
    const line = {
      ...assistant("e1", [{ type: "text", text: "API Error: 400 bad" }], { model: "<synthetic>" }),
      is_api_error_message: true,
    };
    expect(mapAll([line])).toEqual([]);
  });
});

describe("StreamMapper: reasoning", () => {
  it("maps thinking deltas to reasoning, and the whole thinking block only when it was not streamed", () => {
    const streamed = mapAll([
      messageStart("m1"),
      thinkingDelta("m1", 0, "hmm "),
      thinkingDelta("m1", 0, "ok"),
      assistant("m1", [{ type: "thinking", thinking: "hmm ok", signature: "x" }]),
    ]);
    expect(streamed).toEqual([
      { type: "reasoning", text: "hmm " },
      { type: "reasoning", text: "ok" },
    ]);
    const whole = mapAll([
      assistant("m2", [{ type: "thinking", thinking: "all", signature: "x" }]),
    ]);
    expect(whole).toEqual([{ type: "reasoning", text: "all" }]);
  });
});

describe("StreamMapper: tools", () => {
  it("emits a status when a tool_use block starts streaming, then the tool_call with its input", () => {
    const events = mapAll([
      messageStart("m1"),
      toolUseStart("m1", 0, "toolu_1", "Bash"),
      assistant("m1", [toolUse("toolu_1", "Bash", { command: "ls" })]),
    ]);
    expect(events).toEqual([
      { type: "status", message: "Using Bash…", tool_name: "Bash", tool_use_id: "toolu_1" },
      {
        type: "tool_call",
        tool_use_id: "toolu_1",
        tool_name: "Bash",
        kind: "shell_exec",
        normalized: { kind: "shell_exec", command: "ls", background: false },
        input: { command: "ls" },
      },
    ]);
  });

  it("emits the status from the assistant block when nothing was streamed, once per tool_use id", () => {
    const line = assistant("m1", [toolUse("toolu_1", "Edit", { file_path: "/a" })]);
    const events = mapAll([line, line]);
    expect(events.map((e) => e.type)).toEqual(["status", "tool_call"]);
  });

  it.each([
    ["Bash", "shell_exec"],
    ["Edit", "modify_file"],
    ["MultiEdit", "modify_file"],
    ["Write", "modify_file"],
    ["NotebookEdit", "modify_file"],
    ["Read", "read_file"],
    ["Grep", "code_search"],
    ["Glob", "code_search"],
    ["WebFetch", "http_request"],
    ["WebSearch", "http_request"],
    ["Task", "subagent_task"],
    ["Agent", "subagent_task"],
    ["TaskCreate", "create_task"],
    ["TodoWrite", "manage_todos"],
    ["TaskUpdate", "manage_todos"],
    ["mcp__github__create_issue", "generic"],
    ["SomethingNew", "generic"],
    ["constructor", "generic"],
  ])("gives tool %s the kind %s, in the event and its normalized payload", (name, kind) => {
    const events = mapAll([assistant("m1", [toolUse("t", name, {})])]);
    const call = events.find((e) => e.type === "tool_call");
    expect(call).toMatchObject({ kind, normalized: { kind } });
    // Whatever the input, the payload is one the contract describes.
    expect(BridgeEvent.safeParse(call).success).toBe(true);
  });

  it("turns AskUserQuestion with questions into one user_question (no status)", () => {
    const events = mapAll([
      messageStart("m1"),
      toolUseStart("m1", 0, "toolu_q", "AskUserQuestion"),
      assistant("m1", [toolUse("toolu_q", "AskUserQuestion", QUESTION_INPUT)]),
    ]);
    expect(events.filter((e) => e.type === "status")).toEqual([]);
    expect(events.filter((e) => e.type === "user_question")).toEqual([
      {
        type: "user_question",
        tool_use_id: "toolu_q",
        questions: [
          {
            question: "Which approach?",
            header: "Approach",
            options: [
              { label: "A", description: "first" },
              { label: "B", description: "second" },
            ],
            multi_select: false,
          },
        ],
      },
    ]);
  });

  it("maps multiSelect to multi_select and keeps options without description", () => {
    const input = {
      questions: [{ question: "Which?", options: [{ label: "x" }], multiSelect: true }],
    };
    const events = mapAll([assistant("m1", [toolUse("q", "AskUserQuestion", input)])]);
    expect(events.find((e) => e.type === "user_question")).toMatchObject({
      questions: [{ question: "Which?", options: [{ label: "x" }], multi_select: true }],
    });
  });

  it("treats AskUserQuestion without questions as an ordinary status", () => {
    const events = mapAll([assistant("m1", [toolUse("q", "AskUserQuestion", {})])]);
    expect(events[0]).toEqual({
      type: "status",
      message: "Using AskUserQuestion…",
      tool_name: "AskUserQuestion",
      tool_use_id: "q",
    });
    expect(events.some((e) => e.type === "user_question")).toBe(false);
  });

  it("leaves a question to its permission request when the run layer streams it (questionsByRequest); one the CLI settles without asking comes at its result", () => {
    const mapper = new StreamMapper({ questionsByRequest: true });
    const block = (id: string, parent?: string) =>
      assistant("m1", [toolUse(id, "AskUserQuestion", QUESTION_INPUT)], parent ? { parent } : {});
    // Asked through a request: the mapper says nothing of it, and names the subagent it is from.
    expect(mapper.push(block("asked", "task_1")).map((e) => e.type)).toEqual(["tool_call"]);
    expect(mapper.questionRequested("asked")).toBe("task_1");
    expect(mapper.push(toolResult("asked", "answered")).map((e) => e.type)).toEqual([
      "tool_result",
      "tool_update",
    ]);
    // Never asked: the question is not lost.
    expect(mapper.push(block("unasked")).map((e) => e.type)).toEqual(["tool_call"]);
    expect(mapper.push(toolResult("unasked", "denied")).map((e) => e.type)).toEqual([
      "user_question",
      "tool_result",
      "tool_update",
    ]);
    // A request before its block: the block adds nothing either.
    expect(mapper.questionRequested("early")).toBeNull();
    mapper.push(block("early"));
    expect(mapper.push(toolResult("early", "x")).map((e) => e.type)).not.toContain("user_question");
  });

  it("emits a question exactly once whether the tool_use block or the control request comes first", () => {
    const blockFirst = new StreamMapper();
    const fromBlock = blockFirst.push(
      assistant("m1", [toolUse("q", "AskUserQuestion", QUESTION_INPUT)]),
    );
    expect(fromBlock.filter((e) => e.type === "user_question")).toHaveLength(1);
    expect(blockFirst.questionFromControl("q", parseQuestions(QUESTION_INPUT))).toBeUndefined();

    const controlFirst = new StreamMapper();
    expect(controlFirst.questionFromControl("q", parseQuestions(QUESTION_INPUT))).toMatchObject({
      type: "user_question",
    });
    const later = controlFirst.push(
      assistant("m1", [toolUse("q", "AskUserQuestion", QUESTION_INPUT)]),
    );
    expect(later.map((e) => e.type)).toEqual(["tool_call"]);
  });

  it("maps tool results, joining text blocks and cutting long content with truncated", () => {
    const mapper = new StreamMapper({ maxToolResultChars: 10 });
    const events = mapAll(
      [
        toolResult("t1", "short"),
        toolResult("t2", [
          { type: "text", text: "abc" },
          { type: "image", source: {} },
          { type: "text", text: "def" },
        ]),
        toolResult("t3", "0123456789ABCDEF", { isError: true }),
      ],
      mapper,
    );
    expect(events).toEqual([
      {
        type: "tool_result",
        tool_use_id: "t1",
        is_error: false,
        content: "short",
        truncated: false,
      },
      {
        type: "tool_result",
        tool_use_id: "t2",
        is_error: false,
        content: "abc\n[image",
        truncated: true,
      },
      {
        type: "tool_result",
        tool_use_id: "t3",
        is_error: true,
        content: "0123456789",
        truncated: true,
      },
    ]);
  });

  it("does not cut a surrogate pair in half", () => {
    const mapper = new StreamMapper({ maxToolResultChars: 3 });
    const [event] = mapper.push(toolResult("t", "ab😀cd"));
    expect(event).toMatchObject({ content: "ab", truncated: true });
  });
});

describe("StreamMapper: tool calls as data", () => {
  const call = (name: string, input: Json, mapper = new StreamMapper()) =>
    mapAll([assistant("m1", [toolUse("t", name, input)])], mapper).find(
      (e) => e.type === "tool_call",
    );
  /** A `user` line with the tool's result and the CLI's structured copy of it. */
  const resultLine = (content: string, structured: unknown, isError = false) => ({
    ...toolResult("t", content, { isError }),
    tool_use_result: structured,
  });

  it("describes a Bash call as shell_exec with its command, description, timeout and background flag", () => {
    expect(
      call("Bash", {
        command: "npm test",
        description: "Run the tests",
        timeout: 120000,
        run_in_background: true,
      }),
    ).toMatchObject({
      normalized: {
        kind: "shell_exec",
        command: "npm test",
        description: "Run the tests",
        timeout_ms: 120000,
        background: true,
      },
    });
  });

  it("closes a command with its stdout, stderr and exit code 0 from the CLI's structured result", () => {
    const mapper = new StreamMapper();
    call("Bash", { command: "echo hi" }, mapper);
    const events = mapper.push(
      resultLine("hi", { stdout: "hi", stderr: "warn", interrupted: false, isImage: false }),
    );
    expect(events.at(-1)).toEqual({
      type: "tool_update",
      tool_use_id: "t",
      status: "complete",
      normalized: { kind: "shell_exec", exit_code: 0, stdout: "hi", stderr: "warn" },
    });
  });

  it("reads a failed command's exit code from its result text, and keeps the text as its output", () => {
    const mapper = new StreamMapper();
    call("Bash", { command: "ls /nope" }, mapper);
    const text = "Exit code 2\nls: cannot access '/nope': No such file or directory";
    const events = mapper.push(resultLine(text, `Error: ${text}`, true));
    expect(events.at(-1)).toEqual({
      type: "tool_update",
      tool_use_id: "t",
      status: "error",
      normalized: { kind: "shell_exec", exit_code: 2, output: text },
    });
  });

  it("gives a command that never ran (denied) or was interrupted no exit code", () => {
    const denied = new StreamMapper();
    call("Bash", { command: "rm -rf /" }, denied);
    const refusal = "Claude requested permissions to use Bash, but you haven't granted it yet.";
    expect(denied.push(resultLine(refusal, `Error: ${refusal}`, true)).at(-1)).toMatchObject({
      status: "error",
      normalized: { kind: "shell_exec", exit_code: null, output: refusal },
    });
    const interrupted = new StreamMapper();
    call("Bash", { command: "sleep 100" }, interrupted);
    const events = interrupted.push(
      resultLine("", { stdout: "", stderr: "", interrupted: true, isImage: false }),
    );
    expect(events.at(-1)).toMatchObject({
      normalized: { kind: "shell_exec", exit_code: null, interrupted: true },
    });
  });

  it("describes Edit, MultiEdit and Write as file changes, with a unified diff where both sides are known", () => {
    expect(
      call("Edit", {
        file_path: "/w/a.ts",
        old_string: "let x = 1;\n",
        new_string: "const x = 1;\n",
      }),
    ).toMatchObject({
      normalized: {
        kind: "modify_file",
        changes: [
          {
            file_path: "/w/a.ts",
            operation: "edit",
            old_content: "let x = 1;\n",
            new_content: "const x = 1;\n",
            diff: "--- /w/a.ts\n+++ /w/a.ts\n@@ -1,1 +1,1 @@\n-let x = 1;\n+const x = 1;\n",
          },
        ],
      },
    });
    const multi = call("MultiEdit", {
      file_path: "/w/b.ts",
      edits: [
        { old_string: "a", new_string: "b" },
        { old_string: "c", new_string: "d" },
      ],
    });
    expect(multi?.type === "tool_call" && multi.normalized).toMatchObject({
      changes: [
        { file_path: "/w/b.ts", old_content: "a", new_content: "b" },
        { file_path: "/w/b.ts", old_content: "c", new_content: "d" },
      ],
    });
    // A Write does not say what the file held: its new content, and no diff.
    const write = call("Write", { file_path: "/w/c.txt", content: "hello\n" });
    expect(write?.type === "tool_call" && write.normalized).toEqual({
      kind: "modify_file",
      changes: [{ file_path: "/w/c.txt", operation: "write", new_content: "hello\n" }],
    });
  });

  it("closes a Write with the file's change from the CLI's result: what it held, and the diff", () => {
    const mapper = new StreamMapper();
    call("Write", { file_path: "/w/c.txt", content: "one\n2\n" }, mapper);
    // As CLI 2.1.328 reports a Write over an existing file.
    const events = mapper.push(
      resultLine("The file /w/c.txt has been updated successfully.", {
        type: "update",
        filePath: "/w/c.txt",
        content: "one\n2\n",
        structuredPatch: [{ oldStart: 1, oldLines: 2, newStart: 1, newLines: 2, lines: [] }],
        originalFile: "one\ntwo\n",
        userModified: false,
      }),
    );
    expect(events.at(-1)).toEqual({
      type: "tool_update",
      tool_use_id: "t",
      status: "complete",
      normalized: {
        kind: "modify_file",
        changes: [
          {
            file_path: "/w/c.txt",
            operation: "write",
            old_content: "one\ntwo\n",
            new_content: "one\n2\n",
            diff: "--- /w/c.txt\n+++ /w/c.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n",
          },
        ],
      },
    });
    // A file it created held nothing; a result without the structured copy says nothing more.
    const created = new StreamMapper();
    call("Write", { file_path: "/w/new.txt", content: "hi\n" }, created);
    expect(
      created
        .push(
          resultLine("File created successfully at: /w/new.txt", {
            type: "create",
            filePath: "/w/new.txt",
            content: "hi\n",
            structuredPatch: [],
            originalFile: null,
          }),
        )
        .at(-1),
    ).toMatchObject({
      normalized: {
        kind: "modify_file",
        changes: [
          {
            file_path: "/w/new.txt",
            operation: "create",
            new_content: "hi\n",
            diff: "--- /w/new.txt\n+++ /w/new.txt\n@@ -0,0 +1,1 @@\n+hi\n",
          },
        ],
      },
    });
    const bare = new StreamMapper();
    call("Write", { file_path: "/w/d.txt", content: "x" }, bare);
    expect(bare.push(resultLine("ok", undefined)).at(-1)).toMatchObject({
      normalized: { kind: "modify_file" },
    });
  });

  it("cuts the payload's long strings to the tool_result bound, marks it truncated and leaves out a diff of cut text", () => {
    const mapper = new StreamMapper({ maxToolResultChars: 8 });
    const edit = call(
      "Edit",
      { file_path: "/a", old_string: "x".repeat(100), new_string: "y" },
      mapper,
    );
    expect(edit?.type === "tool_call" && edit.normalized).toEqual({
      kind: "modify_file",
      changes: [{ file_path: "/a", operation: "edit", old_content: "xxxxxxxx", new_content: "y" }],
      truncated: true,
    });
    // The CLI's own input is kept as it came.
    expect(edit).toMatchObject({ input: { old_string: "x".repeat(100) } });
    const bash = call(
      "Bash",
      { command: "echo 0123456789" },
      new StreamMapper({ maxToolResultChars: 8 }),
    );
    expect(bash).toMatchObject({ normalized: { command: "echo 012", truncated: true } });
  });

  it("cuts a command's long stdout and stderr in its tool_update to the tool_result bound, marked truncated", () => {
    const mapper = new StreamMapper({ maxToolResultChars: 8 });
    call("Bash", { command: "make" }, mapper);
    const stdout = "o".repeat(100);
    const stderr = "e".repeat(100);
    const events = mapper.push(
      resultLine(`${stdout}\n${stderr}`, { stdout, stderr, interrupted: false, isImage: false }),
    );
    expect(events.at(-1)).toEqual({
      type: "tool_update",
      tool_use_id: "t",
      status: "complete",
      normalized: {
        kind: "shell_exec",
        exit_code: 0,
        stdout: "oooooooo",
        stderr: "eeeeeeee",
        truncated: true,
      },
    });
  });

  it("describes reads, searches, web requests, subagents, tasks and todo lists by their fields", () => {
    expect(call("Read", { file_path: "/a", offset: 10, limit: 20 })).toMatchObject({
      normalized: { kind: "read_file", file_path: "/a", offset: 10, limit: 20 },
    });
    expect(call("Grep", { pattern: "TODO", path: "src", glob: "*.ts" })).toMatchObject({
      normalized: { kind: "code_search", pattern: "TODO", path: "src", glob: "*.ts" },
    });
    expect(call("WebFetch", { url: "https://x.test/", prompt: "summarize" })).toMatchObject({
      normalized: { kind: "http_request", url: "https://x.test/" },
    });
    expect(call("WebSearch", { query: "hono sse" })).toMatchObject({
      normalized: { kind: "http_request", query: "hono sse" },
    });
    expect(
      call("Task", { description: "Find it", prompt: "Look for X", subagent_type: "Explore" }),
    ).toMatchObject({
      normalized: {
        kind: "subagent_task",
        description: "Find it",
        prompt: "Look for X",
        subagent_type: "Explore",
      },
    });
    expect(call("TaskCreate", { subject: "Ship", description: "Ship it" })).toMatchObject({
      normalized: { kind: "create_task", subject: "Ship", description: "Ship it" },
    });
    const todos = call("TodoWrite", {
      todos: [
        { content: "one", status: "completed", activeForm: "Doing one" },
        { content: "two", status: "in_progress", activeForm: "Doing two" },
        { content: "bad", status: "whatever" },
      ],
    });
    expect(todos?.type === "tool_call" && todos.normalized).toEqual({
      kind: "manage_todos",
      todos: [
        { content: "one", status: "completed" },
        { content: "two", status: "in_progress" },
      ],
    });
  });

  it("leaves out fields of the wrong type instead of passing them on", () => {
    const event = call("Bash", { command: ["rm", "-rf"], description: 7, timeout: "soon" });
    expect(event?.type === "tool_call" && event.normalized).toEqual({
      kind: "shell_exec",
      command: "",
      background: false,
    });
    expect(BridgeEvent.safeParse(event).success).toBe(true);
  });

  it("closes, at the result line, every tool call that never got a result", () => {
    const events = mapAll([
      assistant("m1", [toolUse("t1", "Bash", { command: "sleep 9" }), toolUse("t2", "Read", {})]),
      toolResult("t2", "contents"),
      result(),
    ]);
    const updates = events.filter((e) => e.type === "tool_update");
    expect(updates).toEqual([
      {
        type: "tool_update",
        tool_use_id: "t2",
        status: "complete",
        normalized: { kind: "read_file" },
      },
      {
        type: "tool_update",
        tool_use_id: "t1",
        status: "complete",
        normalized: { kind: "shell_exec", exit_code: null },
      },
    ]);
    expect(events.at(-1)?.type).toBe("completion");
  });
});

describe("StreamMapper: subagents and other lines", () => {
  it("carries parent_tool_use_id on events of a subagent's messages", () => {
    const parent = { parent: "toolu_task" };
    const events = mapAll([
      assistant("s1", [{ type: "text", text: "sub" }, toolUse("t2", "Read", {})], parent),
      toolResult("t2", "content", parent),
    ]);
    expect(
      events.map((e) => ("parent_tool_use_id" in e ? e.parent_tool_use_id : undefined)),
    ).toEqual(["toolu_task", "toolu_task", "toolu_task", "toolu_task", "toolu_task"]);
  });

  it("omits parent_tool_use_id on main-thread events", () => {
    const [event] = mapAll([assistant("m", [{ type: "text", text: "x" }])]);
    expect(event).not.toHaveProperty("parent_tool_use_id");
  });

  it("emits rate_limit events, and a status in the default view when the limit is near or reached", () => {
    const limit = (info: Record<string, unknown>) =>
      mapAll([
        { type: "rate_limit_event", rate_limit_info: info, uuid: "u", session_id: SESSION_ID },
      ]);
    const near = { status: "allowed_warning", resetsAt: 1_800_000_000, rateLimitType: "five_hour" };
    expect(limit(near)).toEqual([
      { type: "rate_limit", info: near },
      {
        type: "status",
        message: "Close to the rate limit (five hour limit); it resets at 2027-01-15T08:00:00.000Z",
      },
    ]);
    const reached = { status: "rejected", resetsAt: 1_800_000_000, rateLimitType: "seven_day" };
    expect(limit(reached)[1]).toEqual({
      type: "status",
      message: "Rate limited (seven day limit) until 2027-01-15T08:00:00.000Z",
    });
    // While the limit allows the run (most runs on a subscription), nothing to tell.
    expect(limit({ status: "allowed", rateLimitType: "five_hour" })).toEqual([
      { type: "rate_limit", info: { status: "allowed", rateLimitType: "five_hour" } },
    ]);
  });

  it("tells why a run has gone quiet: each api_retry line is a status, 'API error, retrying 3/10 in 8 s'", () => {
    const retry = (fields: Record<string, unknown>) =>
      mapAll([{ type: "system", subtype: "api_retry", max_retries: 10, ...fields }]);
    expect(
      retry({ attempt: 3, retry_delay_ms: 8000, error_status: 529, error: "overloaded" }),
    ).toEqual([{ type: "status", message: "API error (529 overloaded), retrying 3/10 in 8 s" }]);
    expect(retry({ attempt: 1, retry_delay_ms: 598, error_status: 401, error: "unknown" })).toEqual(
      [{ type: "status", message: "API error (401), retrying 1/10 in 0.6 s" }],
    );
    // A refused connection has no HTTP status.
    expect(
      retry({ attempt: 7, retry_delay_ms: 38_412, error_status: null, error: "unknown" }),
    ).toEqual([{ type: "status", message: "API unreachable, retrying 7/10 in 38 s" }]);
  });

  it("keeps other system lines, control lines and unknown types internal", () => {
    const events = mapAll([
      { type: "system", subtype: "status", status: "requesting" },
      { type: "system", subtype: "task_started", task_id: "t" },
      { type: "control_cancel_request", request_id: "r" },
      { type: "keep_alive" },
      streamEvent("m1", { type: "message_stop" }),
    ]);
    expect(events).toEqual([]);
  });
});

describe("StreamMapper: session and context", () => {
  it("starts with session_status and available_commands from the init line, once", () => {
    const init = {
      ...systemInit(),
      mcp_servers: [{ name: "github", status: "connected" }, { status: "nameless" }],
      slash_commands: ["compact", "cost"],
    };
    const events = mapAll([init, init]);
    expect(events).toEqual([
      {
        type: "session_status",
        status: "new",
        agent_session_id: SESSION_ID,
        model: "claude-test",
        tools: ["Bash", "AskUserQuestion"],
        mcp_servers: [{ name: "github", status: "connected" }],
      },
      { type: "available_commands", commands: [{ name: "compact" }, { name: "cost" }] },
    ]);
    expect(new StreamMapper({ resumed: true }).push(init)[0]).toMatchObject({
      type: "session_status",
      status: "resumed",
    });
  });

  it("emits context_window after each main-thread message, from its final usage", () => {
    const events = mapAll([
      systemInit(),
      messageStart("m1", {
        input_tokens: 10,
        cache_read_input_tokens: 1000,
        cache_creation_input_tokens: 50,
        output_tokens: 1,
      }),
      assistant("m1", [toolUse("t1", "Bash", { command: "ls" })], {
        usage: { input_tokens: 10, cache_read_input_tokens: 1000, cache_creation_input_tokens: 50 },
      }),
      // The message's end carries its final output count.
      streamEvent("m1", { type: "message_delta", usage: { output_tokens: 40 } }),
      toolResult("t1", "a"),
      messageStart("m2", { input_tokens: 5, cache_read_input_tokens: 1100 }),
      streamEvent("m2", { type: "message_delta", usage: { output_tokens: 95 } }),
      // A subagent's message is not the main conversation's context.
      messageStart("s1", { input_tokens: 99_999 }, { parent: "t1" }),
      streamEvent("s1", { type: "message_delta", usage: { output_tokens: 1 } }, { parent: "t1" }),
    ]);
    expect(events.filter((e) => e.type === "context_window")).toEqual([
      { type: "context_window", used: 1100, size: 200_000, remaining: 198_900, efficiency: 0.0055 },
      { type: "context_window", used: 1200, size: 200_000, remaining: 198_800, efficiency: 0.006 },
    ]);
  });

  it("takes the window from the result's modelUsage once known, else the documented one ([1m]: a million)", () => {
    const lines = (init: Record<string, unknown>, modelUsage: unknown) => [
      init,
      messageStart("m1", { input_tokens: 100 }),
      streamEvent("m1", { type: "message_delta", usage: { output_tokens: 20 } }),
      result({ modelUsage }),
    ];
    const windows = (events: BridgeEvent[]) =>
      events.flatMap((e) => (e.type === "context_window" ? [e.size] : []));
    expect(
      windows(mapAll(lines(systemInit(), { "claude-test": { contextWindow: 500_000 } }))),
    ).toEqual([200_000, 500_000]);
    const oneMillion = { ...systemInit(), model: "claude-test[1m]" };
    expect(windows(mapAll(lines(oneMillion, {})))).toEqual([1_000_000, 1_000_000]);
  });

  it("takes a resumed run's API time as the CLI's running total less the session's earlier runs'", () => {
    // resume-1.ndjson then resume-2.ndjson: 38 ms, then a total of 83 ms.
    expect(ownApiMs(83, 38)).toBe(45);
    expect(ownApiMs(38, 0)).toBe(38);
    // A total below the earlier runs' is another history (a worktree's fresh conversation).
    expect(ownApiMs(40, 500)).toBe(40);
  });
});

describe("StreamMapper: completion", () => {
  it("counts dropped output lines in the completion, from a result line or a failure", () => {
    const fromResult = new StreamMapper();
    fromResult.lineDropped();
    fromResult.lineDropped();
    expect(fromResult.push(result()).at(-1)).toMatchObject({
      status: "succeeded",
      dropped_lines: 2,
    });
    const fromFailure = new StreamMapper();
    fromFailure.lineDropped();
    expect(fromFailure.failure("failed", "no result", "agent_exited", 5)).toMatchObject({
      dropped_lines: 1,
    });
    expect(new StreamMapper().push(result()).at(-1)).not.toHaveProperty("dropped_lines");
  });

  it("builds the completion from the result line, with context_window just before it", () => {
    const events = mapAll([
      systemInit(),
      messageStart("m1", {
        input_tokens: 10,
        cache_read_input_tokens: 1000,
        cache_creation_input_tokens: 50,
      }),
      assistant("m1", [{ type: "text", text: "Hi" }], {
        uuid: "last-assistant",
        usage: { input_tokens: 10, cache_read_input_tokens: 1000, cache_creation_input_tokens: 50 },
      }),
      result({ result: "Hi" }),
    ]);
    expect(events.slice(-2)).toEqual([
      { type: "context_window", used: 1060, size: 200_000, remaining: 198_940, efficiency: 0.0053 },
      {
        type: "completion",
        status: "succeeded",
        is_error: false,
        result: "Hi",
        error: null,
        cost_usd: 0.0123,
        duration_ms: 1234,
        usage: {
          input_tokens: 100,
          output_tokens: 20,
          cache_read_tokens: 7,
          cache_creation_tokens: 5,
          num_turns: 1,
          duration_api_ms: 1000,
        },
        agent_session_id: SESSION_ID,
        claude_session_id: SESSION_ID,
        resume_at: "last-assistant",
        last_message_uuid: "last-assistant",
      },
    ]);
  });

  it("accepts cost_usd, counts missing usage as 0 and uses the run's clock without duration_ms", () => {
    const mapper = new StreamMapper({ elapsedMs: () => 42.4 });
    const completion = mapper
      .push({
        type: "result",
        subtype: "success",
        is_error: false,
        cost_usd: 0.5,
        result: "x",
      })
      .at(-1);
    expect(completion).toMatchObject({
      cost_usd: 0.5,
      duration_ms: 42,
      usage: {
        input_tokens: 0,
        output_tokens: 0,
        cache_read_tokens: 0,
        cache_creation_tokens: 0,
        num_turns: 0,
        duration_api_ms: 0,
      },
      agent_session_id: null,
      claude_session_id: null,
      resume_at: null,
      last_message_uuid: null,
    });
  });

  it("takes a resumed run's own cost from model_usage_since_last_result, not the session total", () => {
    // As in resume-2.ndjson: total_cost_usd and modelUsage are the session's running totals.
    const [completion] = mapAll([
      result({
        total_cost_usd: 0.0016,
        modelUsage: { a: { costUSD: 0.0016, contextWindow: 1000 } },
        model_usage_since_last_result: { a: { costUSD: 0.0008 }, b: { costUSD: 0.0001 } },
      }),
    ]).filter((e) => e.type === "completion");
    expect(completion?.type === "completion" && completion.cost_usd).toBeCloseTo(0.0009, 10);
  });

  it("fails with the CLI's message when the result has is_error", () => {
    const [completion] = mapAll([result({ is_error: true, result: "API Error: 400 bad" })]).filter(
      (e) => e.type === "completion",
    );
    expect(completion).toMatchObject({
      status: "failed",
      is_error: true,
      error: "API Error: 400 bad",
      error_code: "agent_error",
      result: null,
    });
  });

  it("says agent_not_authenticated, and what to set, when the CLI has no login (no API call made)", () => {
    // As the real CLI 2.1.328 prints it with no credentials (see runner.real.test.ts).
    const notLoggedIn = "Not logged in · Please run /login";
    const [completion] = mapAll([
      {
        ...assistant("e1", [{ type: "text", text: notLoggedIn }], { model: "<synthetic>" }),
        error: "authentication_failed",
        is_api_error_message: true,
      },
      result({ is_error: true, result: notLoggedIn, api_error_status: null }),
    ]).filter((e) => e.type === "completion");
    expect(completion).toMatchObject({ status: "failed", error_code: "agent_not_authenticated" });
    expect(completion?.type === "completion" && completion.error).toBe(
      `the claude CLI has no valid credentials: set ANTHROPIC_API_KEY (or CLAUDE_CODE_OAUTH_TOKEN) in the server's environment and restart it, or log the CLI in as the user the server runs as (the CLI said: ${notLoggedIn})`,
    );
  });

  it("fails with the errors list or the subtype for error results without text", () => {
    const withErrors = mapAll([
      { type: "result", subtype: "error_during_execution", is_error: true, errors: ["boom"] },
    ]);
    expect(withErrors[0]).toMatchObject({ status: "failed", error: "boom" });
    const bare = mapAll([{ type: "result", subtype: "error_max_turns", is_error: true }]);
    expect(bare[0]).toMatchObject({
      status: "failed",
      error: "claude CLI reported error_max_turns",
    });
  });

  it("names the cap that stopped a run: its key's budget, its own budget or its turns, not agent_error", () => {
    const atBudget = {
      type: "result",
      subtype: "error_max_budget_usd",
      is_error: true,
      errors: ["Reached maximum budget ($0.08)"],
      total_cost_usd: 0.42,
    };
    // --max-budget-usd is what the key's monthly budget had left, unless told it is the run's own.
    expect(mapAll([atBudget])[0]).toMatchObject({
      status: "failed",
      error: "Reached maximum budget ($0.08)",
      error_code: "budget_exhausted",
      cost_usd: 0.42,
    });
    const [own] = mapAll([atBudget], new StreamMapper({ ownBudget: true }));
    expect(own).toMatchObject({ status: "failed", error_code: "max_budget", cost_usd: 0.42 });
    const [turns] = mapAll([
      {
        type: "result",
        subtype: "error_max_turns",
        is_error: true,
        errors: ["Reached maximum number of turns (1)"],
      },
    ]);
    expect(turns).toMatchObject({
      status: "failed",
      error: "Reached maximum number of turns (1)",
      error_code: "max_turns",
    });
    // Any other failure the CLI reports is the agent's error.
    const [other] = mapAll([{ type: "result", subtype: "error_during_execution", is_error: true }]);
    expect(other).toMatchObject({ error_code: "agent_error" });
  });

  it("takes last_message_uuid from the last main-thread assistant or user line, not the result", () => {
    const events = mapAll([
      assistant("m1", [toolUse("t1", "Bash", {})], { uuid: "a1" }),
      toolResult("t1", "ok", { uuid: "u1" }),
      assistant("s1", [{ type: "text", text: "sub" }], { uuid: "sub-1", parent: "t1" }),
      result(),
    ]);
    expect(events.at(-1)).toMatchObject({ resume_at: "u1", last_message_uuid: "u1" });
  });

  it("commits last_message_uuid only when a successful result confirms the turn, never an API error's message", () => {
    const apiError = {
      ...assistant("e1", [{ type: "text", text: "API Error: 529" }], {
        uuid: "synthetic",
        model: "<synthetic>",
      }),
      is_api_error_message: true,
    };
    const good = [assistant("m1", [{ type: "text", text: "a" }], { uuid: "a1" })];
    // An API error after a good message: the run failed, it confirms no message.
    expect(
      mapAll([...good, apiError, result({ is_error: true, result: "API Error: 529" })]).at(-1),
    ).toMatchObject({ status: "failed", last_message_uuid: null });
    // The CLI recovered from an error (a 400 retried once): the good message is the last.
    expect(mapAll([apiError, ...good, result()]).at(-1)).toMatchObject({
      last_message_uuid: "a1",
    });
    // A run that ends without a result (cancelled, timed out) confirms nothing.
    const cut = new StreamMapper();
    mapAll(good, cut);
    expect(cut.failure("cancelled", "cancelled", "cancelled", 10)).toMatchObject({
      last_message_uuid: null,
    });
  });

  it("counts what a run without a result spent from its messages' usage, its cost unknown", () => {
    const mapper = new StreamMapper();
    mapAll(
      [
        messageStart("m1", {
          input_tokens: 300,
          cache_read_input_tokens: 20,
          cache_creation_input_tokens: 10,
          output_tokens: 1,
        }),
        assistant("m1", [toolUse("t1", "Bash", {})]),
        streamEvent("m1", { type: "message_delta", usage: { output_tokens: 25 } }),
        toolResult("t1", "ok"),
        // A subagent's message costs as much; it is no turn of the main thread.
        assistant("s1", [{ type: "text", text: "sub" }], {
          parent: "t1",
          usage: { input_tokens: 50, output_tokens: 7 },
        }),
        // The next message was cut off after its start.
        messageStart("m2", { input_tokens: 400 }),
      ],
      mapper,
    );
    expect(mapper.failure("cancelled", "cancelled by a client", "cancelled", 900)).toMatchObject({
      cost_usd: null,
      usage: {
        input_tokens: 750,
        output_tokens: 32,
        cache_read_tokens: 20,
        cache_creation_tokens: 10,
        num_turns: 2,
        duration_api_ms: 0,
      },
    });
    // Nothing reported, nothing spent.
    expect(new StreamMapper().failure("failed", "x", "agent_exited", 1)).toMatchObject({
      cost_usd: 0,
    });
  });

  it("counts an interrupted turn's tokens from its messages when its result reports none, priced as the result says", () => {
    const mapper = new StreamMapper();
    const completion = mapAll(
      [
        messageStart("m1", { input_tokens: 321, cache_read_input_tokens: 45, output_tokens: 1 }),
        streamEvent("m1", { type: "message_delta", usage: { output_tokens: 9 } }),
        // What Claude Code 2.1.328 writes after an interrupt: no tokens, though it priced the turn.
        result({
          subtype: "error_during_execution",
          is_error: true,
          terminal_reason: "aborted_streaming",
          total_cost_usd: 0.003,
          num_turns: 2,
          duration_api_ms: 120,
          usage: { input_tokens: 0, output_tokens: 0 },
          modelUsage: {},
        }),
      ],
      mapper,
    ).at(-1);
    expect(completion).toMatchObject({
      cost_usd: 0.003,
      usage: {
        input_tokens: 321,
        output_tokens: 9,
        cache_read_tokens: 45,
        cache_creation_tokens: 0,
        num_turns: 1,
        duration_api_ms: 120,
      },
    });
  });

  it("maps nothing after the completion", () => {
    const mapper = new StreamMapper();
    mapper.push(result());
    expect(mapper.done).toBe(true);
    expect(mapper.push(assistant("m9", [{ type: "text", text: "late" }]))).toEqual([]);
  });

  it("builds failure completions with what the run learned (session id, usage so far)", () => {
    const mapper = new StreamMapper();
    mapAll([systemInit(), assistant("m1", [{ type: "text", text: "a" }], { uuid: "a1" })], mapper);
    expect(mapper.failure("timed_out", "timed out", "timed_out", 1500.6)).toEqual({
      type: "completion",
      status: "timed_out",
      is_error: true,
      result: null,
      error: "timed out",
      error_code: "timed_out",
      cost_usd: null,
      duration_ms: 1501,
      usage: {
        input_tokens: 100,
        output_tokens: 1,
        cache_read_tokens: 0,
        cache_creation_tokens: 0,
        num_turns: 1,
        duration_api_ms: 0,
      },
      agent_session_id: SESSION_ID,
      claude_session_id: SESSION_ID,
      resume_at: null,
      last_message_uuid: null,
    });
  });
});

// Captured output of the real CLI (2.1.328) against the mock Messages API; see the README there.
const FIXTURES = resolve(import.meta.dirname, "../../fixtures/stream-json");
const fixtureFiles = (() => {
  try {
    return readdirSync(FIXTURES)
      .filter((f) => f.endsWith(".ndjson"))
      .sort();
  } catch {
    return [];
  }
})();

function readFixture(name: string): Json[] {
  return readFileSync(join(FIXTURES, name), "utf8")
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as Json);
}

const isRecord = (v: unknown): v is Json =>
  typeof v === "object" && v !== null && !Array.isArray(v);
const contentOf = (line: Json): Json[] =>
  isRecord(line.message) && Array.isArray(line.message.content)
    ? line.message.content.filter(isRecord)
    : [];

/** A run's own cost per the fixtures' README: the sum of model_usage_since_last_result costs. */
function ownCost(res: Json): number {
  const since = isRecord(res.model_usage_since_last_result)
    ? res.model_usage_since_last_result
    : {};
  const costs = Object.values(since).flatMap((m) =>
    isRecord(m) && typeof m.costUSD === "number" ? [m.costUSD] : [],
  );
  return costs.length > 0 ? costs.reduce((a, b) => a + b, 0) : Number(res.total_cost_usd ?? 0);
}

describe("StreamMapper on captured real CLI output", () => {
  it("has fixtures to check", () => {
    expect(fixtureFiles.length).toBeGreaterThan(0);
  });

  it.each(fixtureFiles)("%s maps consistently with its lines", (name) => {
    const lines = readFixture(name);
    // Control requests go to the runner, which asks the mapper for the question (as it would).
    const mapper = new StreamMapper();
    const events: BridgeEvent[] = [];
    for (const line of lines) {
      if (
        line.type === "control_request" &&
        isRecord(line.request) &&
        line.request.tool_name === "AskUserQuestion"
      ) {
        const q = mapper.questionFromControl(
          String(line.request.tool_use_id),
          parseQuestions(line.request.input),
        );
        if (q) events.push(q);
      }
      events.push(...mapper.push(line));
    }

    // Every event is a valid BridgeEvent; exactly one completion, and it is last.
    for (const e of events) expect(BridgeEvent.safeParse(e).success).toBe(true);
    expect(events.filter((e) => e.type === "completion")).toHaveLength(1);
    const completion = events.at(-1);
    if (completion?.type !== "completion") throw new Error("completion is not last");

    const assistants = lines.filter(
      (l) => l.type === "assistant" && l.is_api_error_message !== true,
    );
    const mainMessages = lines.filter(
      (l) =>
        (l.type === "assistant" || l.type === "user") &&
        l.parent_tool_use_id === null &&
        l.is_api_error_message !== true,
    );

    // Session: what the init line says, first.
    const init = lines.find((l) => l.type === "system" && l.subtype === "init");
    expect(events.slice(0, 2)).toEqual([
      expect.objectContaining({
        type: "session_status",
        status: "new",
        agent_session_id: init?.session_id,
        model: init?.model,
        tools: init?.tools,
      }),
      {
        type: "available_commands",
        commands: ((init?.slash_commands ?? []) as string[]).map((name) => ({ name })),
      },
    ]);

    // Text: the streamed deltas equal the whole blocks, never doubled; a message a paragraph.
    const byMessage = new Map<string, string>();
    for (const l of assistants) {
      const id = String(isRecord(l.message) ? l.message.id : "");
      for (const b of contentOf(l)) {
        if (b.type === "text") byMessage.set(id, (byMessage.get(id) ?? "") + String(b.text));
      }
    }
    expect(texts(events).join("")).toBe([...byMessage.values()].join("\n\n"));
    const thinking = assistants
      .flatMap((l) =>
        contentOf(l)
          .filter((b) => b.type === "thinking")
          .map((b) => b.thinking),
      )
      .join("");
    expect(events.flatMap((e) => (e.type === "reasoning" ? [e.text] : [])).join("")).toBe(thinking);

    // Tools: one status (or user_question) and one tool_call per tool_use; one tool_result per result block.
    const toolUses = assistants.flatMap((l) => contentOf(l).filter((b) => b.type === "tool_use"));
    for (const t of toolUses) {
      const announced = events.filter(
        (e) => (e.type === "status" || e.type === "user_question") && e.tool_use_id === t.id,
      );
      expect(announced).toHaveLength(1);
      expect(announced[0]?.type).toBe(t.name === "AskUserQuestion" ? "user_question" : "status");
      expect(events.filter((e) => e.type === "tool_call" && e.tool_use_id === t.id)).toHaveLength(
        1,
      );
    }
    const resultBlocks = lines
      .filter((l) => l.type === "user")
      .flatMap((l) => contentOf(l).filter((b) => b.type === "tool_result"));
    expect(events.filter((e) => e.type === "tool_result")).toHaveLength(resultBlocks.length);
    // Every call is closed once: by its result, or at the result line.
    for (const t of toolUses) {
      expect(events.filter((e) => e.type === "tool_update" && e.tool_use_id === t.id)).toHaveLength(
        1,
      );
    }
    for (const event of events) expect(BridgeEvent.safeParse(event).success).toBe(true);

    // Completion: straight from the result line.
    const res = lines.find((l) => l.type === "result");
    if (!res) throw new Error(`${name} has no result line`);
    const usage = res.usage as Json;
    expect(completion).toMatchObject({
      status: res.is_error ? "failed" : "succeeded",
      is_error: res.is_error,
      result: res.is_error ? null : res.result,
      error: res.is_error ? expect.stringContaining(String(res.result)) : null,
      // A 401 is the CLI's credentials; any other error result is the agent's.
      ...(res.is_error
        ? { error_code: res.api_error_status === 401 ? "agent_not_authenticated" : "agent_error" }
        : {}),
      cost_usd: ownCost(res),
      duration_ms: res.duration_ms,
      usage: {
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        cache_read_tokens: usage.cache_read_input_tokens,
        cache_creation_tokens: usage.cache_creation_input_tokens,
        num_turns: res.num_turns,
        duration_api_ms: res.duration_api_ms,
      },
      agent_session_id: res.session_id,
      claude_session_id: res.session_id,
      // Only a result that confirms the turn commits its last message.
      resume_at: res.is_error ? null : (mainMessages.at(-1)?.uuid ?? null),
      last_message_uuid: res.is_error ? null : (mainMessages.at(-1)?.uuid ?? null),
    });
    // The context window after each main-thread message, and from the result, whose modelUsage
    // knows the model's window (errors report no model usage).
    const messageEnds = lines.filter(
      (l) =>
        l.type === "stream_event" &&
        l.parent_tool_use_id === null &&
        isRecord(l.event) &&
        l.event.type === "message_delta",
    );
    const windows = events.filter((e) => e.type === "context_window");
    expect(windows).toHaveLength(messageEnds.length + (messageEnds.length > 0 ? 1 : 0));
    if (!res.is_error) {
      expect(events.at(-2)).toMatchObject({ type: "context_window", size: 1_000_000 });
    }
  });
});
