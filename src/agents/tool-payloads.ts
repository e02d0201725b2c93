import { createPatch, FILE_HEADERS_ONLY } from "diff";
import type { FileChange, ToolKind, ToolOutcome } from "../tool-calls.js";
import { cut } from "./line-fields.js";

// What the back-ends' tool normalizers share: bounding the strings of a payload, and the unified
// diff of a file change.

/** Edits beyond this many lines' difference are not worth a diff (and would cost its time). */
const MAX_DIFF_EDIT_LENGTH = 2_000;

export function toolStatusMessage(toolName: string): string {
  return `Using ${toolName}…`;
}

/** The outcome of a call the run ended without a result for: nothing is known of it. */
export function unfinishedOutcome(kind: ToolKind): ToolOutcome {
  return kind === "shell_exec" ? { kind, exit_code: null } : { kind };
}

/** Cuts each string it is given to one bound, and remembers whether it cut any. */
export class Bounder {
  private cutAny = false;

  constructor(private readonly max: number) {}

  text(value: string): string {
    const { content, truncated } = cut(value, this.max);
    if (truncated) this.cutAny = true;
    return content;
  }

  /** `{[key]: value}` with the value cut when it is a string, else nothing: spread it. */
  field<K extends string>(key: K, value: unknown): { [P in K]?: string } {
    return (typeof value === "string" ? { [key]: this.text(value) } : {}) as { [P in K]?: string };
  }

  /** The first strings of a list that fit the bound together; the rest are cut. */
  list(values: readonly string[]): string[] {
    const kept: string[] = [];
    let used = 0;
    for (const value of values) {
      used += value.length;
      if (used > this.max) {
        this.cutAny = true;
        break;
      }
      kept.push(value);
    }
    return kept;
  }

  /** `{truncated: true}` once a string was cut, else nothing: spread into the payload. */
  get flag(): { truncated?: true } {
    return this.cutAny ? { truncated: true } : {};
  }
}

/**
 * One file's change with its contents bounded, and a unified diff of them when both sides are
 * known (a created file's old side is empty) and each fits the bound: a diff of a cut text
 * would show lines that were never removed.
 */
export function fileChange(
  bound: Bounder,
  max: number,
  change: {
    file_path: string;
    operation: FileChange["operation"];
    old_content?: unknown;
    new_content?: unknown;
  },
): FileChange {
  const { file_path, operation } = change;
  const old_content = typeof change.old_content === "string" ? change.old_content : undefined;
  const new_content = typeof change.new_content === "string" ? change.new_content : undefined;
  const before = operation === "create" ? (old_content ?? "") : old_content;
  const diff =
    before !== undefined &&
    new_content !== undefined &&
    before.length <= max &&
    new_content.length <= max
      ? createPatch(file_path, before, new_content, undefined, undefined, {
          maxEditLength: MAX_DIFF_EDIT_LENGTH,
          headerOptions: FILE_HEADERS_ONLY,
        })
      : undefined;
  return {
    file_path: bound.text(file_path),
    operation,
    ...(old_content === undefined ? {} : { old_content: bound.text(old_content) }),
    ...(new_content === undefined ? {} : { new_content: bound.text(new_content) }),
    ...(diff === undefined ? {} : { diff: bound.text(diff) }),
  };
}
