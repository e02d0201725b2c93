import type { ToolOutcome } from "../../tool-calls.js";
import { int, isRecord, type Json, str } from "../line-fields.js";
import { Bounder } from "../tool-payloads.js";

// What Claude Code's tool results say beyond their text, for a `tool_update`: a Read's file, a
// search's files, a fetch's status, a subagent's launch, a task list. Each comes from the user
// line's structured `tool_use_result` (shapes seen from CLI 2.1.328: test/fixtures/stream-json/
// tool-results.ndjson), and, for a Read or a search without one, from the result's text. A field
// the line does not carry is left out.

export interface ToolResultData {
  isError: boolean;
  text: string;
  structured: unknown;
}

type Outcome<K extends ToolOutcome["kind"]> = Extract<ToolOutcome, { kind: K }>;

function optInt<K extends string>(key: K, value: unknown): { [P in K]?: number } {
  return (typeof value === "number" && Number.isFinite(value) ? { [key]: int(value) } : {}) as {
    [P in K]?: number;
  };
}

function structured(result: ToolResultData): Json | undefined {
  return !result.isError && isRecord(result.structured) ? result.structured : undefined;
}

/** A Read's result text: each line `<number>\t<text>`, numbered from the first line read. */
const NUMBERED_LINE = /^\s*(\d+)\t(.*)$/;

/** The lines of a Read's text without their numbers, or undefined when it is not all numbered. */
function numberedText(text: string): { content: string; start: number; count: number } | undefined {
  const lines = text.split("\n");
  const parsed: string[] = [];
  let start: number | undefined;
  for (const line of lines) {
    const match = NUMBERED_LINE.exec(line);
    if (match === null) return undefined;
    start ??= Number(match[1]);
    parsed.push(match[2] ?? "");
  }
  return start === undefined
    ? undefined
    : { content: parsed.join("\n"), start, count: lines.length };
}

/**
 * A Read's file: from `tool_use_result.file` (`type: "text"`: `filePath`, `content`, `startLine`,
 * `numLines`, `totalLines`), else from the line-numbered text the model got.
 */
export function readOutcome(result: ToolResultData, max: number): Outcome<"read_file"> {
  if (result.isError) return { kind: "read_file" };
  const b = new Bounder(max);
  const s = structured(result);
  const file = s !== undefined && s.type === "text" && isRecord(s.file) ? s.file : undefined;
  if (file !== undefined) {
    return {
      kind: "read_file",
      ...b.field("file_path", file.filePath),
      ...b.field("content", file.content),
      ...optInt("start_line", file.startLine),
      ...optInt("line_count", file.numLines),
      ...optInt("total_lines", file.totalLines),
      ...b.flag,
    };
  }
  const numbered = s === undefined ? numberedText(result.text) : undefined;
  if (numbered === undefined) return { kind: "read_file" };
  return {
    kind: "read_file",
    content: b.text(numbered.content),
    start_line: numbered.start,
    line_count: numbered.count,
    ...b.flag,
  };
}

const NO_FILES = "No files found";
/** A Grep's list of files starts with this line (and may name its pagination after it). */
const FOUND_FILES = /^Found \d+ files?\b/;
/** A Glob's note after its first 100 files. */
const GLOB_CUT = "(Results are truncated. Consider using a more specific path or pattern.)";

/** A search's files from its text, when the CLI gave nothing structured. */
function filesFromText(name: string, text: string): string[] | undefined {
  if (text === NO_FILES) return [];
  const lines = text.split("\n").filter((l) => l !== "");
  if (name === "Grep") return FOUND_FILES.test(lines[0] ?? "") ? lines.slice(1) : undefined;
  if (name === "Glob") return lines.filter((l) => l !== GLOB_CUT);
  return undefined;
}

/**
 * A Glob's or Grep's result: `tool_use_result` has `filenames` and `numFiles` (Grep also `mode`;
 * in `content` mode the matching lines as `content`, in `count` mode the counts and
 * `numMatches`); without it, the files are read from the text.
 */
export function searchOutcome(
  name: string,
  result: ToolResultData,
  max: number,
): Outcome<"code_search"> {
  if (result.isError) return { kind: "code_search" };
  const b = new Bounder(max);
  const s = structured(result);
  if (s === undefined) {
    const files = filesFromText(name, result.text);
    if (files === undefined) return { kind: "code_search" };
    const kept = b.list(files);
    return { kind: "code_search", files: kept, file_count: files.length, ...b.flag };
  }
  const mode = str(s.mode);
  const names = Array.isArray(s.filenames)
    ? s.filenames.filter((f): f is string => typeof f === "string")
    : [];
  // Grep's content and count modes list no files (and count none in `content` mode).
  const listsFiles = mode === undefined || mode === "files_with_matches";
  const files = listsFiles && Array.isArray(s.filenames) ? b.list(names) : undefined;
  return {
    kind: "code_search",
    ...(files === undefined ? {} : { files }),
    ...(mode === "content" ? {} : optInt("file_count", s.numFiles)),
    ...optInt("match_count", s.numMatches),
    ...(listsFiles ? {} : b.field("output", s.content)),
    // Glob's own flag: it stopped after its first 100 files.
    ...(s.truncated === true ? { truncated: true as const } : b.flag),
  };
}

/** WebFetch's result has the page's `code`, `codeText` and `url`; the text is what the model got. */
export function httpOutcome(result: ToolResultData, max: number): Outcome<"http_request"> {
  const b = new Bounder(max);
  const s = structured(result);
  return {
    kind: "http_request",
    ...(s === undefined ? {} : b.field("url", s.url)),
    ...(s === undefined ? {} : optInt("status_code", s.code)),
    ...(s === undefined ? {} : b.field("status_text", s.codeText)),
    response: b.text(result.text),
    ...b.flag,
  };
}

/** An Agent (Task) call's result: the subagent's `status` and `agentId`, and the result text. */
export function subagentOutcome(result: ToolResultData, max: number): Outcome<"subagent_task"> {
  const b = new Bounder(max);
  const s = structured(result);
  return {
    kind: "subagent_task",
    ...(s === undefined ? {} : b.field("status", s.status)),
    ...(s === undefined ? {} : b.field("agent_id", s.agentId)),
    output: b.text(result.text),
    ...b.flag,
  };
}

/** TaskCreate's result: `{task: {id, subject, description}}`. */
export function createTaskOutcome(result: ToolResultData, max: number): Outcome<"create_task"> {
  const b = new Bounder(max);
  const s = structured(result);
  const task = s !== undefined && isRecord(s.task) ? s.task : {};
  return { kind: "create_task", ...b.field("task_id", task.id), ...b.flag };
}

/** TaskList's result: `{tasks: [{id, subject, status, blockedBy}]}`; other calls give none. */
export function todosOutcome(result: ToolResultData, max: number): Outcome<"manage_todos"> {
  const s = structured(result);
  if (s === undefined || !Array.isArray(s.tasks)) return { kind: "manage_todos" };
  const b = new Bounder(max);
  const tasks = s.tasks.filter(isRecord).flatMap((t) => {
    const id = str(t.id);
    const subject = str(t.subject);
    const status = str(t.status);
    return id === undefined || subject === undefined || status === undefined
      ? []
      : [{ id: b.text(id), subject: b.text(subject), status: b.text(status) }];
  });
  return { kind: "manage_todos", tasks, ...b.flag };
}

/** Any other tool (MCP tools included): its result text. */
export function genericOutcome(result: ToolResultData, max: number): Outcome<"generic"> {
  const b = new Bounder(max);
  return { kind: "generic", output: b.text(result.text), ...b.flag };
}
