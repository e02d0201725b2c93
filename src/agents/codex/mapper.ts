import {
  type BridgeEvent,
  bareCompletion,
  type CompletionErrorCode,
  type CompletionEvent,
  type CompletionStatusValue,
} from "../../events.js";
import type { ModelPrice } from "../../prices.js";
import type { ToolKind } from "../../tool-calls.js";
import { cut, DEFAULT_MAX_TOOL_RESULT_CHARS, isRecord, type Json, str } from "../line-fields.js";
import { MessageJoiner } from "../message-text.js";
import { toolStatusMessage, unfinishedOutcome } from "../tool-payloads.js";
import { itemFailed, itemInput, itemResult } from "./item-results.js";
import { itemOutcome, itemTool, normalizeItem } from "./tools.js";
import {
  bridgeUsage,
  type CodexUsageTotals,
  runCost,
  runShare,
  totalsOf,
  ZERO_CODEX_USAGE,
} from "./usage-totals.js";

export type { CodexUsageTotals };

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
// Usage: a run's own share of the thread's running totals (usage-totals.ts), from the totals its
// previous run ended with, which the caller passes in and reads back from `usageTotals`.

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
  /**
   * The run was given `--output-schema`: its final message is the answer as JSON text, which the
   * completion carries parsed as `structured_output` (left out when it is not JSON).
   */
  structured?: boolean;
}

/** The final message parsed, when it is JSON; undefined when it is not. */
function parsedAnswer(text: string | null): unknown {
  if (text === null) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** What an operator does about a codex without a valid key: a run's error says it. */
const NOT_AUTHENTICATED =
  "the codex CLI has no valid credentials: set OPENAI_API_KEY in the server's environment and restart it";

/** How codex reports a refused or missing key (HTTP 401 from the API, or no key at all). */
const AUTH_FAILURE = /\b401 Unauthorized\b|Missing environment variable: `OPENAI_API_KEY`/;

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

export class CodexMapper {
  private readonly previousTotals: CodexUsageTotals;
  private readonly price: ModelPrice | undefined;
  private readonly maxToolResultChars: number;
  private readonly elapsedMs: () => number;
  private readonly resumed: boolean;
  private readonly structured: boolean;
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
    this.structured = options.structured ?? false;
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
        input: itemInput(item),
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

  /** The tool_result of a finished tool item; none for items that produce no output. */
  private toolResult(item: Json): BridgeEvent[] {
    const id = str(item.id);
    if (id === undefined || this.resultSent.has(id)) return [];
    const result = itemResult(item);
    if (result === undefined) return [];
    this.resultSent.add(id);
    const { content, truncated } = cut(result.text, this.maxToolResultChars);
    return [{ type: "tool_result", tool_use_id: id, is_error: result.isError, content, truncated }];
  }

  /** The `tool_update` that ends a finished tool item's call. */
  private toolUpdate(item: Json): BridgeEvent[] {
    const id = str(item.id);
    const kind = id === undefined ? undefined : this.openCalls.get(id);
    if (id === undefined || kind === undefined) return [];
    this.openCalls.delete(id);
    return [
      {
        type: "tool_update",
        tool_use_id: id,
        status: itemFailed(item) ? "error" : "complete",
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
      cost_usd: runCost(this.price, run),
      duration_ms: Math.round(this.elapsedMs()),
      usage: bridgeUsage(run),
      agent_session_id: this.thread,
      claude_session_id: null,
      resume_at: null,
      last_message_uuid: null,
      ...(this.structured ? { structured_output: parsedAnswer(this.lastMessage) } : {}),
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
      usage: bridgeUsage(ZERO_CODEX_USAGE),
      agent_session_id: this.thread,
      claude_session_id: null,
      resume_at: null,
      last_message_uuid: null,
      ...this.dropped(),
    };
  }
}
