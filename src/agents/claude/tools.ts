import type { UserQuestion } from "../../events.js";
import type { FileChange, NormalizedToolCall, ToolKind, ToolOutcome } from "../../tool-calls.js";
import { int, isRecord, type Json, str } from "../line-fields.js";
import { Bounder, fileChange } from "../tool-payloads.js";
import {
  createTaskOutcome,
  genericOutcome,
  httpOutcome,
  readOutcome,
  searchOutcome,
  subagentOutcome,
  todosOutcome,
} from "./tool-results.js";

// Claude Code's tools as the bridge's normalized tool calls: which kind each tool is, the parts
// of its input a client needs, and what its result says (a shell command's output and exit code,
// what a Write replaced).
// Input shapes are the CLI's tool schemas (2.1.x); a field of the wrong type is left out.

/** The tool whose calls become `user_question` events. */
export const ASK_USER_QUESTION = "AskUserQuestion";

/** Parses AskUserQuestion input; an empty list means "not a question call". */
export function parseQuestions(input: unknown): UserQuestion[] {
  if (!isRecord(input) || !Array.isArray(input.questions)) return [];
  const questions: UserQuestion[] = [];
  for (const q of input.questions) {
    if (!isRecord(q) || typeof q.question !== "string") continue;
    const options: UserQuestion["options"] = [];
    if (Array.isArray(q.options)) {
      for (const o of q.options) {
        if (!isRecord(o) || typeof o.label !== "string") continue;
        const description = str(o.description);
        options.push(
          description === undefined ? { label: o.label } : { label: o.label, description },
        );
      }
    }
    const header = str(q.header);
    questions.push({
      question: q.question,
      ...(header === undefined ? {} : { header }),
      options,
      multi_select: q.multiSelect === true,
    });
  }
  return questions;
}

const KINDS: Record<string, ToolKind> = {
  Read: "read_file",
  NotebookRead: "read_file",
  Edit: "modify_file",
  MultiEdit: "modify_file",
  Write: "modify_file",
  NotebookEdit: "modify_file",
  Bash: "shell_exec",
  PowerShell: "shell_exec",
  Glob: "code_search",
  Grep: "code_search",
  LS: "code_search",
  WebFetch: "http_request",
  WebSearch: "http_request",
  Task: "subagent_task",
  Agent: "subagent_task",
  TaskCreate: "create_task",
  TodoWrite: "manage_todos",
  TaskUpdate: "manage_todos",
  TaskList: "manage_todos",
};

export function toolKind(toolName: string): ToolKind {
  return Object.hasOwn(KINDS, toolName) ? (KINDS[toolName] ?? "generic") : "generic";
}

const TODO_STATUSES = new Set(["pending", "in_progress", "completed"]);
type TodoStatus = "pending" | "in_progress" | "completed";

function optInt<K extends string>(key: K, value: unknown): { [P in K]?: number } {
  return (typeof value === "number" && Number.isFinite(value) ? { [key]: int(value) } : {}) as {
    [P in K]?: number;
  };
}

function fileChanges(name: string, input: Json, bound: Bounder, max: number): FileChange[] {
  const file_path = str(input.file_path) ?? str(input.notebook_path) ?? "";
  switch (name) {
    case "Write":
      return [
        fileChange(bound, max, { file_path, operation: "write", new_content: input.content }),
      ];
    case "NotebookEdit":
      return [
        fileChange(bound, max, { file_path, operation: "edit", new_content: input.new_source }),
      ];
    case "MultiEdit":
      return (Array.isArray(input.edits) ? input.edits.filter(isRecord) : []).map((e) =>
        fileChange(bound, max, {
          file_path,
          operation: "edit",
          old_content: e.old_string,
          new_content: e.new_string,
        }),
      );
    default:
      return [
        fileChange(bound, max, {
          file_path,
          operation: "edit",
          old_content: input.old_string,
          new_content: input.new_string,
        }),
      ];
  }
}

function todos(value: unknown, bound: Bounder): { content: string; status: TodoStatus }[] {
  return (Array.isArray(value) ? value.filter(isRecord) : []).flatMap((t) => {
    const content = str(t.content);
    const status = str(t.status);
    return content !== undefined && status !== undefined && TODO_STATUSES.has(status)
      ? [{ content: bound.text(content), status: status as TodoStatus }]
      : [];
  });
}

/**
 * A tool_use block's call as the bridge's normalized payload, its strings cut to `max`.
 * `workDir` is where the CLI runs its shell commands (its init line's `cwd`), when known.
 */
export function normalizeToolCall(
  name: string,
  input: unknown,
  max: number,
  workDir?: string,
): NormalizedToolCall {
  const i = isRecord(input) ? input : {};
  const b = new Bounder(max);
  switch (toolKind(name)) {
    case "read_file":
      return {
        kind: "read_file",
        file_path: b.text(str(i.file_path) ?? str(i.notebook_path) ?? ""),
        ...optInt("offset", i.offset),
        ...optInt("limit", i.limit),
        ...b.flag,
      };
    case "modify_file": {
      const changes = fileChanges(name, i, b, max);
      return { kind: "modify_file", changes, ...b.flag };
    }
    case "shell_exec":
      return {
        kind: "shell_exec",
        command: b.text(str(i.command) ?? ""),
        ...b.field("work_dir", workDir),
        ...b.field("description", i.description),
        ...optInt("timeout_ms", i.timeout),
        background: i.run_in_background === true,
        ...b.flag,
      };
    case "code_search":
      return {
        kind: "code_search",
        ...b.field("pattern", i.pattern),
        ...b.field("path", i.path),
        ...b.field("glob", i.glob),
        ...b.flag,
      };
    case "http_request":
      return {
        kind: "http_request",
        ...b.field("url", i.url),
        ...b.field("query", i.query),
        ...b.flag,
      };
    case "subagent_task":
      return {
        kind: "subagent_task",
        ...b.field("description", i.description),
        ...b.field("prompt", i.prompt),
        ...b.field("subagent_type", i.subagent_type),
        ...b.flag,
      };
    case "create_task":
      return {
        kind: "create_task",
        ...b.field("subject", i.subject),
        ...b.field("description", i.description),
        ...b.flag,
      };
    case "manage_todos":
      return {
        kind: "manage_todos",
        ...(Array.isArray(i.todos) ? { todos: todos(i.todos, b) } : {}),
        ...b.field("task_id", i.taskId),
        ...b.field("status", i.status),
        ...b.flag,
      };
    default:
      return { kind: "generic" };
  }
}

/**
 * A Write's change from the CLI's structured result, which holds what the file held before
 * (`originalFile`, null for a file it created): the call's input says only what it holds now.
 */
function writtenFile(structured: unknown, max: number): ToolOutcome {
  const s = isRecord(structured) ? structured : {};
  const file_path = str(s.filePath);
  const created = s.type === "create";
  if (file_path === undefined || (!created && typeof s.originalFile !== "string")) {
    return { kind: "modify_file" };
  }
  const bound = new Bounder(max);
  const change = fileChange(bound, max, {
    file_path,
    operation: created ? "create" : "write",
    old_content: s.originalFile,
    new_content: s.content,
  });
  return { kind: "modify_file", changes: [change], ...bound.flag };
}

/** How the Bash tool reports a command that exited non-zero: its result starts with this. */
const EXIT_CODE = /^Exit code (\d+)/;

/**
 * A tool result's outcome. For a shell command: stdout and stderr from the CLI's structured
 * `tool_use_result`, its exit code (0 when it succeeded, N from "Exit code N" when it failed;
 * null when it never ran, e.g. denied, or was interrupted), and the result's text as `output`
 * when the CLI gave nothing structured. For a Write: the file's change, old side included. For
 * the other kinds, what their results carry (tool-results.ts).
 */
export function toolOutcome(
  name: string,
  result: { isError: boolean; text: string; structured: unknown },
  max: number,
): ToolOutcome {
  const kind = toolKind(name);
  if (name === "Write" && !result.isError) return writtenFile(result.structured, max);
  switch (kind) {
    case "shell_exec":
      break;
    case "read_file":
      return name === "Read" ? readOutcome(result, max) : { kind };
    case "code_search":
      return searchOutcome(name, result, max);
    case "http_request":
      return httpOutcome(result, max);
    case "subagent_task":
      return subagentOutcome(result, max);
    case "create_task":
      return createTaskOutcome(result, max);
    case "manage_todos":
      return todosOutcome(result, max);
    case "generic":
      return genericOutcome(result, max);
    default:
      return { kind };
  }
  const bound = new Bounder(max);
  const s = isRecord(result.structured) ? result.structured : undefined;
  const interrupted = s?.interrupted === true;
  const failedWith = result.isError ? EXIT_CODE.exec(result.text) : null;
  const exit_code =
    failedWith !== null ? Number(failedWith[1]) : !result.isError && s && !interrupted ? 0 : null;
  const stdout = s === undefined ? undefined : str(s.stdout);
  const stderr = s === undefined ? undefined : str(s.stderr);
  return {
    kind: "shell_exec",
    exit_code,
    ...(stdout === undefined ? {} : { stdout: bound.text(stdout) }),
    ...(stderr === undefined ? {} : { stderr: bound.text(stderr) }),
    ...(stdout === undefined && stderr === undefined ? { output: bound.text(result.text) } : {}),
    ...(interrupted ? { interrupted } : {}),
    ...bound.flag,
  };
}
