import { REPLY_MARKER } from "./marker.js";

// What a run's replies say: the progress comment while it goes (its status, the tools it used),
// then its result (the final text, the structured output folded away, cost and duration, and a
// footer naming the run). The completion is read as unknown JSON, field by field: it may come
// from a newer or older bridge than this one (`structured_output` is newer).

export interface ReviewComment {
  path: string;
  line: number;
  body: string;
}

export interface RunEnd {
  /** `succeeded`, `failed`, `cancelled`, `timed_out`, `interrupted`. */
  status: string;
  result: string | null;
  error: string | null;
  costUsd: number | null;
  durationMs: number | null;
  /** Undefined: the run had no output schema. */
  structuredOutput: unknown;
}

/** What the replies are made from: the run as it stands. */
export interface RunReport {
  runId: string;
  /** The run's status while it goes (`queued`, `running`). */
  status: string;
  tools: readonly string[];
  /** Set once the run has ended. */
  end: RunEnd | null;
}

/** GitHub refuses a comment or a check's summary over 65 536 characters. */
const MAX_BODY_CHARS = 60_000;
/** GitHub's commit status description: 140 characters. */
const MAX_DESCRIPTION_CHARS = 140;
const MAX_REVIEW_COMMENTS = 50;

type Json = Record<string, unknown>;
const obj = (v: unknown): Json | null =>
  v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Json) : null;
const str = (v: unknown): string | null => (typeof v === "string" ? v : null);
const finite = (v: unknown): number | null =>
  typeof v === "number" && Number.isFinite(v) ? v : null;

/** The end of a run as its stored completion event says, or null for anything else. */
export function readRunEnd(completion: unknown): RunEnd | null {
  const event = obj(completion);
  const status = str(event?.status);
  if (!event || !status) return null;
  return {
    status,
    result: str(event.result),
    error: str(event.error),
    costUsd: finite(event.cost_usd),
    durationMs: finite(event.duration_ms),
    structuredOutput: event.structured_output ?? undefined,
  };
}

/** At most `max` characters, never ending in half of a surrogate pair. */
export function cut(text: string, max: number): string {
  if (text.length <= max) return text;
  const code = text.charCodeAt(max - 1);
  const end = code >= 0xd800 && code <= 0xdbff ? max - 1 : max;
  return `${text.slice(0, end)}…`;
}

/** Lone surrogates (which a forge's JSON parser refuses) become U+FFFD; NUL is dropped. */
function clean(text: string): string {
  return text
    .replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, "\uFFFD")
    .replaceAll("\u0000", "");
}

/** A fence longer than any run of backticks in the text, so that the text cannot close it. */
function fenced(text: string, info: string): string {
  const longest = Math.max(2, ...[...text.matchAll(/`+/g)].map((m) => m[0].length));
  const fence = "`".repeat(longest + 1);
  return `${fence}${info}\n${text}\n${fence}`;
}

function toolsLine(tools: readonly string[]): string {
  if (tools.length === 0) return "No tools used yet.";
  const counts = new Map<string, number>();
  for (const tool of tools) counts.set(tool, (counts.get(tool) ?? 0) + 1);
  const listed = [...counts].map(([tool, n]) => {
    const name = `\`${tool.replaceAll("`", "")}\``;
    return n > 1 ? `${name} ×${n}` : name;
  });
  return `Tools used so far: ${listed.join(", ")}.`;
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

function footer(report: RunReport, end: RunEnd): string {
  const parts = [
    end.status,
    ...(end.costUsd === null ? [] : [`$${end.costUsd.toFixed(4)}`]),
    ...(end.durationMs === null ? [] : [seconds(end.durationMs)]),
    `agent-bridge run ${report.runId}`,
  ];
  return `<sub>${parts.join(" · ")}</sub>`;
}

/**
 * What a run's reply says it did: the error of a run that did not succeed; else its structured
 * output's `summary`, when that is a string (the run's text is then its answer as JSON, shown
 * folded below), or else its text.
 */
function textOf(end: NonNullable<RunReport["end"]>): string | null {
  if (end.status !== "succeeded") return end.error ?? end.result;
  return str(obj(end.structuredOutput)?.summary) ?? end.result;
}

/** The comment (or GitLab note): progress while the run goes, its result once it has ended. */
export function commentBody(report: RunReport): string {
  const { end } = report;
  if (!end) {
    return clean(
      [
        REPLY_MARKER,
        `**agent-bridge** is on it: the run is ${report.status}.`,
        "",
        toolsLine(report.tools),
        "",
        `<sub>agent-bridge run ${report.runId}</sub>`,
      ].join("\n"),
    );
  }
  const text = textOf(end);
  const headline =
    end.status === "succeeded" ? "" : `**The run ${end.status.replaceAll("_", " ")}.**\n\n`;
  const structured =
    end.structuredOutput === undefined
      ? ""
      : `\n\n<details><summary>Structured output</summary>\n\n${fenced(
          cut(JSON.stringify(end.structuredOutput, null, 2) ?? "null", MAX_BODY_CHARS / 2),
          "json",
        )}\n\n</details>`;
  const room = MAX_BODY_CHARS - structured.length - 500;
  return clean(
    `${REPLY_MARKER}\n${headline}${cut(text?.trim() || "(no text)", room)}${structured}\n\n---\n${footer(report, end)}`,
  );
}

/** A check run's title and summary. */
export function checkOutput(report: RunReport): { title: string; summary: string } {
  const { end } = report;
  if (!end) return { title: `Run ${report.status}`, summary: `agent-bridge run ${report.runId}` };
  const text = textOf(end);
  return {
    title: `Run ${end.status.replaceAll("_", " ")}`,
    summary: clean(`${cut(text?.trim() || "(no text)", MAX_BODY_CHARS)}\n\n${footer(report, end)}`),
  };
}

/** A commit status's one line. */
export function statusDescription(report: RunReport): string {
  const { end } = report;
  const what = end
    ? `run ${end.status.replaceAll("_", " ")}${end.durationMs === null ? "" : ` in ${seconds(end.durationMs)}`}`
    : `run ${report.status}`;
  return cut(`agent-bridge: ${what}`, MAX_DESCRIPTION_CHARS);
}

/**
 * The line comments a structured output carries as `review_comments: [{path, line, body}]`;
 * entries of another shape are left out, and at most MAX_REVIEW_COMMENTS taken.
 */
export function reviewComments(structuredOutput: unknown): ReviewComment[] {
  const list = obj(structuredOutput)?.review_comments;
  if (!Array.isArray(list)) return [];
  const comments: ReviewComment[] = [];
  for (const entry of list) {
    const path = str(obj(entry)?.path);
    const line = obj(entry)?.line;
    const body = str(obj(entry)?.body);
    if (!path || !body || path.length > 1000 || path.includes("\u0000")) continue;
    if (typeof line !== "number" || !Number.isSafeInteger(line) || line < 1) continue;
    comments.push({ path, line, body: clean(cut(body, MAX_BODY_CHARS / 4)) });
    if (comments.length === MAX_REVIEW_COMMENTS) break;
  }
  return comments;
}

/** A review's own text (GitHub), or the one note that carries the line comments (GitLab). */
export function reviewBody(report: RunReport, comments: readonly ReviewComment[], inline: boolean) {
  const lines = inline
    ? [`${comments.length} comment${comments.length === 1 ? "" : "s"} on the code.`]
    : comments.map(
        (c) => `- \`${c.path.replaceAll("`", "")}\` line ${c.line}:\n\n${indent(c.body)}`,
      );
  return clean(
    cut(
      `${REPLY_MARKER}\n**agent-bridge review**\n\n${lines.join("\n\n")}\n\n<sub>agent-bridge run ${report.runId}</sub>`,
      MAX_BODY_CHARS,
    ),
  );
}

const indent = (text: string) =>
  text
    .split("\n")
    .map((line) => `  ${line}`)
    .join("\n");
