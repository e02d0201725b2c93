import { isRecord, type Json, str } from "../line-fields.js";

// What a codex tool item carries besides its normalized call (tools.ts): the input a
// `tool_call` shows, and the text and error of its `tool_result`.

/** A tool item's input, as its `tool_call` carries it. */
export function itemInput(item: Json): unknown {
  switch (item.type) {
    case "command_execution":
      return { command: str(item.command) ?? "" };
    case "file_change":
      return { changes: Array.isArray(item.changes) ? item.changes : [] };
    case "mcp_tool_call":
      return item.arguments ?? {};
    case "web_search":
      return {
        query: str(item.query) ?? "",
        ...(isRecord(item.action) ? { action: item.action } : {}),
      };
    case "todo_list":
      return { items: Array.isArray(item.items) ? item.items : [] };
    default:
      return {};
  }
}

/** A finished tool item's output; undefined for items that produce none. */
export function itemResult(item: Json): { text: string; isError: boolean } | undefined {
  switch (item.type) {
    case "command_execution":
      return {
        text: str(item.aggregated_output) ?? "",
        isError:
          item.status !== "completed" || (item.exit_code !== 0 && item.exit_code !== undefined),
      };
    case "file_change":
      return { text: changesText(item), isError: item.status !== "completed" };
    case "mcp_tool_call":
      return { text: mcpResultText(item), isError: item.status !== "completed" };
    default:
      return undefined;
  }
}

/** Whether a finished tool item failed, for its `tool_update`. */
export function itemFailed(item: Json): boolean {
  return (
    item.status === "failed" ||
    item.status === "declined" ||
    (typeof item.exit_code === "number" && item.exit_code !== 0)
  );
}

/** A file_change item's changes as lines "add <path>", for its tool_result. */
function changesText(item: Json): string {
  if (!Array.isArray(item.changes)) return "";
  return item.changes
    .flatMap((c) =>
      isRecord(c) && typeof c.path === "string" ? [`${str(c.kind) ?? "change"} ${c.path}`] : [],
    )
    .join("\n");
}

/** An MCP tool call's result as text: its text blocks joined, other blocks named. */
function mcpResultText(item: Json): string {
  if (isRecord(item.error)) return str(item.error.message) ?? "";
  const result = isRecord(item.result) ? item.result : {};
  if (!Array.isArray(result.content)) return "";
  return result.content
    .map((b) =>
      isRecord(b) && b.type === "text" && typeof b.text === "string"
        ? b.text
        : `[${isRecord(b) ? (str(b.type) ?? "content") : "content"}]`,
    )
    .join("\n");
}
