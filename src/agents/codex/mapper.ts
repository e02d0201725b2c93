import {
  type BridgeEvent,
  bareCompletion,
  type CompletionErrorCode,
  type CompletionEvent,
  type CompletionStatusValue,
  type Usage,
} from "../../events.js";
import { costOf, type ModelPrice } from "../../prices.js";
import type { ToolKind } from "../../tool-calls.js";
import {
  cut,
  DEFAULT_MAX_TOOL_RESULT_CHARS,
  int,
  isRecord,
  type Json,
  str,
} from "../line-fields.js";
import { MessageJoiner } from "../message-text.js";
import { toolStatusMessage, unfinishedOutcome } from "../tool-payloads.js";
import { itemOutcome, itemTool, normalizeItem } from "./tools.js";

// Turns the JSONL lines of `codex exec --json` (already parsed) into BridgeEvents. Pure and
// synchronous: feed it lines in order with `push`; `turn.completed` or `turn.failed` yields the
// one `completion`, after which the mapper is done. Line shapes: see test/fixtures/codex/README.md.
//
// Text: codex prints each agent message whole (`item.completed`, no token deltas), so each
// becomes one `text_delta`, a new paragraph after the run's earlier text (message-text.ts);
// reasoning summaries likewise become `reasoning`. `thread.started` gives the `session_status`.
// Tools: the first line of an item (`item.started`, else `item.completed`) gives a `status` and a
// `tool_call` (normalized, see tools.ts); `item.completed` gives the `tool_result` (for items with
// output) and the `tool_update`. Each is emitted once per item id; `turn.completed` closes the
// calls still open.
// Usage: `turn.completed.usage` is the thread's running total (it counts every earlier turn after
// `exec resume`), so a run's own usage is the difference from the totals its previous run ended
// with, which the caller passes in and reads back from `usageTotals`.

/** `turn.completed.usage` of codex-cli 0.171.0: running totals over the thread. */
export interface CodexUsageTotals {
  input_tokens: number;
  cached_input_tokens: number;
  cache_write_input_tokens: number;
  output_tokens: number;
  reasoning_output_tokens: number;
}

const ZERO_CODEX_USAGE: CodexUsageTotals = {
  input_tokens: 0,
  cached_input_tokens: 0,
  cache_write_input_tokens: 0,
  output_tokens: 0,
  reasoning_output_tokens: 0,
};

export interface CodexMapperOptions {
  /** The thread's usage totals when this run started (from the previous run's `usageTotals`). */
  previousTotals?: CodexUsageTotals;
  /** The model's price; without it the completion's cost is null. */
  price?: ModelPrice;
  /** Longest `tool_result` content in characters; longer content is cut and marked truncated. */
  maxToolResultChars?: number;
  /** Milliseconds since the run started: codex reports no duration of its own. */
  elapsedMs?: () => number;
  /** The run continues a thread (`exec resume`): its `session_status` says `resumed`. */
  resumed?: boolean;
}

/** What an operator does about a codex without a valid key: a run's error says it. */
const NOT_AUTHENTICATED =
  "the codex CLI has no valid credentials: set OPENAI_API_KEY in the server's environment and restart it";

/** How codex reports a refused or missing key (HTTP 401 from the API, or no key at all). */
const AUTH_FAILURE = /\b401 Unauthorized\b|Missing environment variable: `OPENAI_API_KEY`/;

function totalsOf(usage: unknown): CodexUsageTotals {
  const u = isRecord(usage) ? usage : {};
  return {
    input_tokens: int(u.input_tokens),
    cached_input_tokens: int(u.cached_input_tokens),
    cache_write_input_tokens: int(u.cache_write_input_tokens),
    output_tokens: int(u.output_tokens),
    reasoning_output_tokens: int(u.reasoning_output_tokens),
  };
}

/**
 * This run's share of the thread's totals. Totals below the previous ones mean the previous
 * totals are not this thread's baseline (another thread, or a history codex rebuilt): then the
 * totals are all this run's.
 */
function runShare(totals: CodexUsageTotals, previous: CodexUsageTotals): CodexUsageTotals {
  const keys = Object.keys(totals) as Array<keyof CodexUsageTotals>;
  if (keys.some((k) => totals[k] < previous[k])) return totals;
  const share = { ...totals };
  for (const k of keys) share[k] = totals[k] - previous[k];
  return share;
}

/**
 * codex reports an HTTP error as the response body when it is not one it knows
 * (`{"error":{"message":…}}`): the message inside is what a person should read.
 */
function readableError(message: string): string {
  try {
    const parsed: unknown = JSON.parse(message);
    const inner =
      isRecord(parsed) && isRecord(parsed.error) ? str(parsed.error.message) : undefined;
    return inner ?? message;
  } catch {
    return message;
  }
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

export class CodexMapper {
  private readonly previousTotals: CodexUsageTotals;
  private readonly price: ModelPrice | undefined;
  private readonly maxToolResultChars: number;
  private readonly elapsedMs: () => number;
  private readonly resumed: boolean;
  private readonly joiner = new MessageJoiner();
  private thread: string | null = null;
  private totals: CodexUsageTotals;
  private lastMessage: string | null = null;
  /** The message of the latest top-level `error` line: why the turn is about to fail. */
  private lastError: string | null = null;
  private readonly toolCallSent = new Set<string>();
  private readonly resultSent = new Set<string>();
  /** Tool calls not finished yet, by item id: closed with a `tool_update` at the turn's end. */
  private readonly openCalls = new Map<string, ToolKind>();
  private finished = false;
  /** Output lines dropped for being over the line bound: their events are missing. */
  private droppedLines = 0;

  constructor(options: CodexMapperOptions = {}) {
    this.previousTotals = options.previousTotals ?? ZERO_CODEX_USAGE;
    this.totals = this.previousTotals;
    this.price = options.price;
    this.maxToolResultChars = options.maxToolResultChars ?? DEFAULT_MAX_TOOL_RESULT_CHARS;
    this.elapsedMs = options.elapsedMs ?? (() => 0);
    this.resumed = options.resumed ?? false;
  }

  /** True once `turn.completed` / `turn.failed` has produced the completion. */
  get done(): boolean {
    return this.finished;
  }

  /** The codex thread id (what `exec resume` takes), once `thread.started` has carried it. */
  get threadId(): string | null {
    return this.thread;
  }

  /** The thread's usage totals after this run: the next run's `previousTotals`. */
  get usageTotals(): CodexUsageTotals {
    return this.totals;
  }

  push(line: Json): BridgeEvent[] {
    if (this.finished) return [];
    switch (line.type) {
      case "thread.started": {
        const first = this.thread === null;
        this.thread = str(line.thread_id) ?? this.thread;
        // codex names no model or tools in its output.
        return first
          ? [
              {
                type: "session_status",
                status: this.resumed ? "resumed" : "new",
                agent_session_id: this.thread,
                model: null,
              },
            ]
          : [];
      }
      case "item.started":
      case "item.updated":
        return isRecord(line.item) ? this.itemStarted(line.item) : [];
      case "item.completed":
        return isRecord(line.item) ? this.itemCompleted(line.item) : [];
      case "error":
        this.lastError = str(line.message) ?? this.lastError;
        return [];
      case "turn.completed":
        return [...this.closeOpenCalls(), this.completed(line)];
      case "turn.failed":
        return [this.failed(line)];
      default:
        // turn.started, item.plan.delta, request_user_input (not offered in exec mode): internal.
        return [];
    }
  }

  /** Counts a line of the CLI's output that was dropped (over the line bound) in the completion. */
  lineDropped(): void {
    this.droppedLines++;
  }

  /** The completion of a run that ended without `turn.completed` / `turn.failed`. */
  failure(
    status: CompletionStatusValue,
    error: string,
    errorCode: CompletionErrorCode,
    durationMs: number,
  ): CompletionEvent {
    this.finished = true;
    const said = this.lastError === null ? "" : ` (codex said: ${readableError(this.lastError)})`;
    return {
      ...bareCompletion(status, `${error}${said}`),
      error_code: errorCode,
      cost_usd: null,
      duration_ms: Math.max(0, Math.round(durationMs)),
      agent_session_id: this.thread,
      ...this.dropped(),
    };
  }

  private dropped(): { dropped_lines?: number } {
    return this.droppedLines > 0 ? { dropped_lines: this.droppedLines } : {};
  }

  /** `status` and `tool_call` for a tool item, once per item id. */
  private itemStarted(item: Json): BridgeEvent[] {
    const id = str(item.id);
    if (id === undefined || this.toolCallSent.has(id)) return [];
    const tool = itemTool(item);
    if (tool === undefined) return [];
    this.toolCallSent.add(id);
    this.openCalls.set(id, tool.kind);
    return [
      {
        type: "status",
        message: toolStatusMessage(tool.name),
        tool_name: tool.name,
        tool_use_id: id,
      },
      {
        type: "tool_call",
        tool_use_id: id,
        tool_name: tool.name,
        kind: tool.kind,
        normalized: normalizeItem(item, this.maxToolResultChars),
        input: this.inputOf(item),
      },
    ];
  }

  private itemCompleted(item: Json): BridgeEvent[] {
    switch (item.type) {
      case "agent_message": {
        const text = str(item.text);
        if (!text) return [];
        this.lastMessage = text;
        return [{ type: "text_delta", text: this.joiner.join("", str(item.id) ?? "", text) }];
      }
      case "reasoning": {
        const text = str(item.text);
        return text ? [{ type: "reasoning", text }] : [];
      }
      case "error":
        // A warning codex carried on after (e.g. a model missing from its catalog): the turn's
        // own outcome says whether the run failed.
        return [];
      default:
        return [...this.itemStarted(item), ...this.toolResult(item), ...this.toolUpdate(item)];
    }
  }

  private inputOf(item: Json): unknown {
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

  /** The tool_result of a finished tool item; none for items that produce no output. */
  private toolResult(item: Json): BridgeEvent[] {
    const id = str(item.id);
    if (id === undefined || this.resultSent.has(id)) return [];
    let text: string;
    let isError: boolean;
    switch (item.type) {
      case "command_execution":
        text = str(item.aggregated_output) ?? "";
        isError =
          item.status !== "completed" || (item.exit_code !== 0 && item.exit_code !== undefined);
        break;
      case "file_change":
        text = changesText(item);
        isError = item.status !== "completed";
        break;
      case "mcp_tool_call":
        text = mcpResultText(item);
        isError = item.status !== "completed";
        break;
      default:
        return [];
    }
    this.resultSent.add(id);
    const { content, truncated } = cut(text, this.maxToolResultChars);
    return [{ type: "tool_result", tool_use_id: id, is_error: isError, content, truncated }];
  }

  /** The `tool_update` that ends a finished tool item's call. */
  private toolUpdate(item: Json): BridgeEvent[] {
    const id = str(item.id);
    const kind = id === undefined ? undefined : this.openCalls.get(id);
    if (id === undefined || kind === undefined) return [];
    this.openCalls.delete(id);
    const failed =
      item.status === "failed" ||
      item.status === "declined" ||
      (typeof item.exit_code === "number" && item.exit_code !== 0);
    return [
      {
        type: "tool_update",
        tool_use_id: id,
        status: failed ? "error" : "complete",
        normalized: itemOutcome(item, kind, this.maxToolResultChars),
      },
    ];
  }

  /** A `tool_update` for each call the turn ended without finishing (as complete). */
  private closeOpenCalls(): BridgeEvent[] {
    const events: BridgeEvent[] = [...this.openCalls].map(([id, kind]) => ({
      type: "tool_update",
      tool_use_id: id,
      status: "complete",
      normalized: unfinishedOutcome(kind),
    }));
    this.openCalls.clear();
    return events;
  }

  private completed(line: Json): CompletionEvent {
    this.finished = true;
    this.totals = totalsOf(line.usage);
    const run = runShare(this.totals, this.previousTotals);
    return {
      type: "completion",
      status: "succeeded",
      is_error: false,
      result: this.lastMessage,
      error: null,
      cost_usd: this.cost(run),
      duration_ms: Math.round(this.elapsedMs()),
      usage: this.bridgeUsage(run),
      agent_session_id: this.thread,
      claude_session_id: null,
      resume_at: null,
      last_message_uuid: null,
      ...this.dropped(),
    };
  }

  private failed(line: Json): CompletionEvent {
    this.finished = true;
    const said = (isRecord(line.error) ? str(line.error.message) : undefined) ?? this.lastError;
    const reported = readableError(said ?? "codex reported a failed turn");
    const notAuthenticated = said !== null && AUTH_FAILURE.test(said);
    return {
      type: "completion",
      status: "failed",
      is_error: true,
      result: null,
      error: notAuthenticated ? `${NOT_AUTHENTICATED} (codex said: ${reported})` : reported,
      error_code: notAuthenticated ? "agent_not_authenticated" : "agent_error",
      // A failed turn reports no usage, so its cost is unknown (what it spent shows in the next
      // turn's totals).
      cost_usd: null,
      duration_ms: Math.round(this.elapsedMs()),
      usage: this.bridgeUsage(ZERO_CODEX_USAGE),
      agent_session_id: this.thread,
      claude_session_id: null,
      resume_at: null,
      last_message_uuid: null,
      ...this.dropped(),
    };
  }

  /**
   * The bridge's usage: its `input_tokens` are the uncached ones (as Anthropic counts them),
   * while OpenAI's `input_tokens` include the cached ones.
   */
  private bridgeUsage(run: CodexUsageTotals): Usage {
    return {
      input_tokens: Math.max(0, run.input_tokens - run.cached_input_tokens),
      output_tokens: run.output_tokens,
      cache_read_tokens: run.cached_input_tokens,
      cache_creation_tokens: run.cache_write_input_tokens,
      // One codex turn per run (codex does not count its model requests).
      num_turns: 1,
      duration_api_ms: 0,
    };
  }

  private cost(run: CodexUsageTotals): number | null {
    // Cache writes are among the uncached input tokens, and billed as input.
    return costOf(this.price, {
      inputTokens: Math.max(0, run.input_tokens - run.cached_input_tokens),
      outputTokens: run.output_tokens,
      cacheReadTokens: run.cached_input_tokens,
      cacheCreationTokens: 0,
    });
  }
}
