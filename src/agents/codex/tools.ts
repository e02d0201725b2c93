import type { FileChange, NormalizedToolCall, ToolKind, ToolOutcome } from "../../tool-calls.js";
import { isRecord, type Json, str } from "../line-fields.js";
import { Bounder, fileChange } from "../tool-payloads.js";
import { itemResult } from "./item-results.js";

// Codex's tool items (`exec --json`) as the bridge's tools: the name a client sees, the
// normalized call, and the outcome of a finished item. Item shapes: test/fixtures/codex/README.md.

export interface CodexTool {
  name: string;
  kind: ToolKind;
}

const ITEM_TOOLS: Record<string, CodexTool> = {
  command_execution: { name: "shell", kind: "shell_exec" },
  file_change: { name: "apply_patch", kind: "modify_file" },
  web_search: { name: "web_search", kind: "http_request" },
  todo_list: { name: "todo_list", kind: "manage_todos" },
};

/** The tool behind an item; undefined for items that are not tool calls (messages, reasoning). */
export function itemTool(item: Json): CodexTool | undefined {
  const type = str(item.type);
  if (type === "mcp_tool_call") {
    return {
      name: `mcp__${str(item.server) ?? "unknown"}__${str(item.tool) ?? "unknown"}`,
      kind: "generic",
    };
  }
  return type !== undefined && Object.hasOwn(ITEM_TOOLS, type) ? ITEM_TOOLS[type] : undefined;
}

/** codex's change kinds as the bridge's file operations. */
const OPERATIONS: Record<string, FileChange["operation"]> = {
  add: "create",
  delete: "delete",
  update: "edit",
};

function changes(item: Json, bound: Bounder, max: number): FileChange[] {
  return (Array.isArray(item.changes) ? item.changes.filter(isRecord) : []).flatMap((c) => {
    const path = str(c.path);
    if (path === undefined) return [];
    const kind = str(c.kind) ?? "update";
    const operation = Object.hasOwn(OPERATIONS, kind) ? (OPERATIONS[kind] ?? "edit") : "edit";
    return [fileChange(bound, max, { file_path: path, operation })];
  });
}

/** A tool item's call as the bridge's normalized payload, its strings cut to `max`. */
export function normalizeItem(item: Json, max: number): NormalizedToolCall {
  const b = new Bounder(max);
  switch (item.type) {
    case "command_execution":
      return {
        kind: "shell_exec",
        command: b.text(str(item.command) ?? ""),
        background: false,
        ...b.flag,
      };
    case "file_change": {
      const list = changes(item, b, max);
      return { kind: "modify_file", changes: list, ...b.flag };
    }
    case "web_search": {
      const action = isRecord(item.action) ? item.action : {};
      return {
        kind: "http_request",
        ...b.field("query", item.query),
        ...b.field("url", action.url),
        ...b.flag,
      };
    }
    case "todo_list":
      return {
        kind: "manage_todos",
        todos: (Array.isArray(item.items) ? item.items.filter(isRecord) : []).flatMap((t) => {
          const text = str(t.text);
          return text === undefined
            ? []
            : [{ content: b.text(text), status: t.completed === true ? "completed" : "pending" }];
        }),
        ...b.flag,
      };
    default:
      return { kind: "generic" };
  }
}

/**
 * A finished item's outcome: a command's exit code and its output (codex gives one stream), an
 * MCP tool's result text. A command item names no work dir, a web search no result.
 */
export function itemOutcome(item: Json, kind: ToolKind, max: number): ToolOutcome {
  const b = new Bounder(max);
  if (kind === "generic") {
    const result = itemResult(item);
    return result === undefined
      ? { kind }
      : { kind: "generic", output: b.text(result.text), ...b.flag };
  }
  if (kind !== "shell_exec") return { kind };
  const exit = item.exit_code;
  return {
    kind: "shell_exec",
    exit_code: typeof exit === "number" && Number.isInteger(exit) ? exit : null,
    ...b.field("output", item.aggregated_output),
    ...b.flag,
  };
}
