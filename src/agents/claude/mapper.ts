import {
  type BridgeEvent,
  bareCompletion,
  type CompletionErrorCode,
  type CompletionEvent,
  type CompletionStatusValue,
  type Usage,
  type UserQuestion,
} from "../../events.js";
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
import { apiRetryStatus, initEvents, rateLimitStatus } from "./system-lines.js";
import {
  ASK_USER_QUESTION,
  normalizeToolCall,
  parseQuestions,
  toolKind,
  toolOutcome,
} from "./tools.js";
import { contextWindow, documentedWindow, reportedWindow, runCost, UsageLedger } from "./usage.js";

// Turns the CLI's stream-json lines (already parsed) into BridgeEvents. Pure and synchronous:
// feed it lines in order with `push`; the `result` line yields the `completion`, after which the
// mapper is done. `control_request` lines are the runner's business (see control.ts), except
// that `questionFromControl` lets it emit a question the mapper has not emitted yet.
//
// Text: with --include-partial-messages the CLI streams `stream_event` deltas and then repeats
// each finished content block in an `assistant` line. Deltas become `text_delta` at once; the
// whole block only contributes what the deltas did not already carry (all of it when none came),
// so the same text is never emitted twice. Thinking works the same way, as `reasoning`. Only the
// main thread's text is `text_delta` (what the agent says to the user); a subagent's (a line with
// `parent_tool_use_id`) is `subagent_text_delta`. A new message's text starts a new paragraph
// (message-text.ts). Text that comes only in the `result` (some slash commands) or as a local
// command's output (`/compact`) is emitted as `text_delta` too.
//
// Tools: a `status` as soon as a tool_use block starts (from the stream, else from the assistant
// line); AskUserQuestion with questions is a `user_question` instead, taken from the assistant
// line where its input is complete. Each is emitted once per tool_use id. With the whole block
// comes the `tool_call` (normalized, see tools.ts); its `tool_result` brings a `tool_update`, and
// at the `result` line every call still open is closed by one.
//
// The init line gives `session_status` and `available_commands`; each main-thread message's end
// (its `message_delta`) a `context_window`; API retries and rate limits a `status` (system-lines.ts).
// The uuid of the run's last main-thread message is committed only when a successful `result`
// confirms the turn: it is where a retry resumes the conversation, so it must never be the
// synthetic message of an API error, nor a turn the run did not finish.

type UserQuestionEvent = Extract<BridgeEvent, { type: "user_question" }>;

export interface StreamMapperOptions {
  /** Longest `tool_result` content in characters; longer content is cut and marked truncated. */
  maxToolResultChars?: number;
  /** Milliseconds since the run started; used when the result line carries no duration. */
  elapsedMs?: () => number;
  /**
   * The run's `--max-budget-usd` is its own cap (`max_budget_usd`), not what its key's monthly
   * budget has left: a run stopped at it ends `max_budget` rather than `budget_exhausted`.
   */
  ownBudget?: boolean;
  /** The run continues the CLI's session (`--resume`): its `session_status` says `resumed`. */
  resumed?: boolean;
  /**
   * The run layer streams each question with its permission request, answerable
   * (RunContext.answersQuestions): an AskUserQuestion's tool_use block then gives no event.
   */
  questionsByRequest?: boolean;
}

/** What a local slash command (`/compact`) printed, as the CLI replays it in a user line. */
const LOCAL_COMMAND_OUTPUT = /^<local-command-stdout>([\s\S]*)<\/local-command-stdout>$/;

/** What an operator does about a CLI without credentials: a run's error says it. */
const NOT_AUTHENTICATED =
  "the claude CLI has no valid credentials: set ANTHROPIC_API_KEY (or CLAUDE_CODE_OAUTH_TOKEN) in the server's environment and restart it, or log the CLI in as the user the server runs as";

/** What one message has streamed on one channel, and how much of it whole blocks have matched. */
interface Streamed {
  text: string;
  consumed: number;
}

interface MessageState {
  text: Streamed;
  thinking: Streamed;
}

function withParent<T extends object>(event: T, parent: string | null): T {
  return parent === null ? event : { ...event, parent_tool_use_id: parent };
}

/** A tool_result's content as one string: text blocks joined, other blocks named. */
function toolResultText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content))
    return content === undefined || content === null ? "" : JSON.stringify(content);
  const parts: string[] = [];
  for (const block of content) {
    if (isRecord(block) && block.type === "text" && typeof block.text === "string") {
      parts.push(block.text);
    } else if (isRecord(block) && typeof block.type === "string") {
      parts.push(`[${block.type}]`);
    }
  }
  return parts.join("\n");
}

export class StreamMapper {
  private readonly maxToolResultChars: number;
  private readonly elapsedMs: () => number;
  private readonly ownBudget: boolean;
  private readonly resumed: boolean;
  private readonly questionsByRequest: boolean;
  private sessionId: string | null = null;
  /** The latest main-thread message's uuid: the run's last message once a result confirms it. */
  private pendingUuid: string | null = null;
  private initSeen = false;
  /** Current message id of each scope ("" = main thread, else the parent tool_use id). */
  private readonly currentMessage = new Map<string, string>();
  private readonly messages = new Map<string, MessageState>();
  private readonly statusSent = new Set<string>();
  private readonly toolCallSent = new Set<string>();
  /** Tool calls without a result yet: their tool, kind and scope, to close them at the result. */
  private readonly openCalls = new Map<
    string,
    { name: string; kind: ToolKind; parent: string | null }
  >();
  private readonly questionSent = new Set<string>();
  /**
   * Questions left to the run layer (questionsByRequest) whose permission request has not come:
   * one the CLI settles without asking (its permission mode) is emitted at its tool_result.
   */
  private readonly questionsHeld = new Map<
    string,
    { questions: UserQuestion[]; parent: string | null }
  >();
  private readonly usage = new UsageLedger();
  private readonly joiner = new MessageJoiner();
  /** The model the init line names (it may say `[1m]`), and the latest main message's model. */
  private initModel: string | undefined;
  private lastModel: string | undefined;
  /** The main thread's latest API message, whose usage says how full the context is. */
  private lastMainMessage: string | undefined;
  private finished = false;
  /** Output lines dropped for being over the line bound: their events are missing. */
  private droppedLines = 0;
  /** The API refused the CLI's credentials, or it had none ("Not logged in"). */
  private notAuthenticated = false;

  constructor(options: StreamMapperOptions = {}) {
    this.maxToolResultChars = options.maxToolResultChars ?? DEFAULT_MAX_TOOL_RESULT_CHARS;
    this.elapsedMs = options.elapsedMs ?? (() => 0);
    this.ownBudget = options.ownBudget ?? false;
    this.resumed = options.resumed ?? false;
    this.questionsByRequest = options.questionsByRequest ?? false;
  }

  /** True once the `result` line has produced the completion. */
  get done(): boolean {
    return this.finished;
  }

  push(line: Json): BridgeEvent[] {
    if (this.finished) return [];
    const sid = str(line.session_id);
    if (sid) this.sessionId = sid;
    const parent = str(line.parent_tool_use_id) ?? null;
    switch (line.type) {
      case "stream_event":
        return isRecord(line.event) ? this.streamEvent(line, line.event, parent) : [];
      case "assistant":
        return this.assistant(line, parent);
      case "user":
        return this.user(line, parent);
      case "rate_limit_event": {
        const info = this.rateLimitInfo(line);
        const status = rateLimitStatus(info);
        return [{ type: "rate_limit", info }, ...(status ? [status] : [])];
      }
      case "system":
        return this.system(line);
      case "result":
        return this.result(line);
      default:
        // Control lines, keep-alives: internal.
        return [];
    }
  }

  /**
   * A `user_question` for an AskUserQuestion permission request, unless the tool_use block has
   * already produced it (so a question is emitted exactly once, whichever comes first).
   */
  questionFromControl(toolUseId: string, questions: UserQuestion[]): UserQuestionEvent | undefined {
    if (this.questionSent.has(toolUseId)) return undefined;
    this.questionSent.add(toolUseId);
    this.statusSent.add(toolUseId);
    return { type: "user_question", tool_use_id: toolUseId, questions };
  }

  /**
   * The run layer streams this question with its permission request (questionsByRequest), so the
   * mapper never will; returns the subagent's call it comes from (its Task tool use), if any.
   */
  questionRequested(toolUseId: string): string | null {
    this.questionSent.add(toolUseId);
    this.statusSent.add(toolUseId);
    const held = this.questionsHeld.get(toolUseId);
    this.questionsHeld.delete(toolUseId);
    return held?.parent ?? null;
  }

  /** Counts a line of the CLI's output that was dropped (over the line bound) in the completion. */
  lineDropped(): void {
    this.droppedLines++;
  }

  /** The completion of a run that ended without a result line. */
  failure(
    status: CompletionStatusValue,
    error: string,
    errorCode: CompletionErrorCode,
    durationMs: number,
  ): CompletionEvent {
    this.finished = true;
    // What the messages reported, as no result says what the run spent; its cost is unknown
    // (the CLI prices a run only in its result) unless it spent nothing.
    const usage = this.usage.total();
    const spent =
      usage.input_tokens +
      usage.output_tokens +
      usage.cache_read_tokens +
      usage.cache_creation_tokens;
    return {
      ...bareCompletion(status, error),
      error_code: errorCode,
      cost_usd: spent > 0 ? null : 0,
      duration_ms: Math.max(0, Math.round(durationMs)),
      usage,
      agent_session_id: this.sessionId,
      claude_session_id: this.sessionId,
      ...this.dropped(),
    };
  }

  private dropped(): { dropped_lines?: number } {
    return this.droppedLines > 0 ? { dropped_lines: this.droppedLines } : {};
  }

  private system(line: Json): BridgeEvent[] {
    switch (line.subtype) {
      case "init":
        // Once: the CLI may send it again within a run (after compacting).
        if (this.initSeen) return [];
        this.initSeen = true;
        this.initModel = str(line.model);
        return initEvents(line, this.resumed);
      case "api_retry":
        return [apiRetryStatus(line)];
      default:
        // status, thinking tokens, tasks, hooks…: internal.
        return [];
    }
  }

  private state(messageId: string): MessageState {
    let state = this.messages.get(messageId);
    if (!state) {
      state = { text: { text: "", consumed: 0 }, thinking: { text: "", consumed: 0 } };
      this.messages.set(messageId, state);
    }
    return state;
  }

  private messageKey(scope: string, id: string | undefined): string {
    return id ?? this.currentMessage.get(scope) ?? `scope:${scope}`;
  }

  private streamEvent(line: Json, event: Json, parent: string | null): BridgeEvent[] {
    const scope = parent ?? "";
    switch (event.type) {
      case "message_start": {
        const message = isRecord(event.message) ? event.message : {};
        const id = str(message.id) ?? str(line.api_message_id);
        const previous = this.currentMessage.get(scope);
        // Whole blocks of the previous message have all arrived by now.
        if (previous !== undefined && previous !== id) this.messages.delete(previous);
        if (id !== undefined) {
          this.currentMessage.set(scope, id);
          this.noteUsage(id, message, parent);
        }
        return [];
      }
      case "content_block_start": {
        const block = isRecord(event.content_block) ? event.content_block : {};
        const id = str(block.id);
        const name = str(block.name);
        // AskUserQuestion waits for its complete input: it may be a question, not a status.
        if (block.type !== "tool_use" || !id || !name || name === ASK_USER_QUESTION) return [];
        return this.status(id, name, parent);
      }
      case "content_block_delta": {
        const delta = isRecord(event.delta) ? event.delta : {};
        const key = this.messageKey(scope, str(line.api_message_id));
        if (delta.type === "text_delta" && typeof delta.text === "string" && delta.text) {
          this.state(key).text.text += delta.text;
          return [this.text(key, delta.text, parent)];
        }
        if (
          delta.type === "thinking_delta" &&
          typeof delta.thinking === "string" &&
          delta.thinking
        ) {
          this.state(key).thinking.text += delta.thinking;
          return [withParent({ type: "reasoning", text: delta.thinking }, parent)];
        }
        return [];
      }
      case "message_delta": {
        // The message's end: its final usage, and so how full the context is after it.
        const key = this.messageKey(scope, str(line.api_message_id));
        this.usage.report(key, event.usage, parent === null);
        const used = parent === null ? this.usage.contextUsed(key) : undefined;
        return used === undefined ? [] : [contextWindow(used, this.windowSize())];
      }
      default:
        return [];
    }
  }

  /** Text of a message: the user's (`text_delta`) on the main thread, else a subagent's. */
  private text(messageKey: string, text: string, parent: string | null): BridgeEvent {
    return parent === null
      ? { type: "text_delta", text: this.joiner.join("", messageKey, text) }
      : {
          type: "subagent_text_delta",
          text: this.joiner.join(parent, messageKey, text),
          parent_tool_use_id: parent,
        };
  }

  private assistant(line: Json, parent: string | null): BridgeEvent[] {
    const message = isRecord(line.message) ? line.message : {};
    // An API error comes as a synthetic assistant message; its text is the completion's error,
    // not something the model said, and it is no message to resume the conversation at.
    if (line.is_api_error_message === true) {
      if (line.error === "authentication_failed") this.notAuthenticated = true;
      return [];
    }
    const uuid = str(line.uuid);
    if (parent === null && uuid) this.pendingUuid = uuid;
    const key = this.messageKey(parent ?? "", str(message.id));
    if (message.model !== "<synthetic>") this.noteUsage(key, message, parent);
    const content = Array.isArray(message.content) ? message.content : [];
    const events: BridgeEvent[] = [];
    for (const block of content) {
      if (!isRecord(block)) continue;
      if (block.type === "text" && typeof block.text === "string") {
        const text = this.unstreamed(this.state(key).text, block.text);
        if (text) events.push(this.text(key, text, parent));
      } else if (block.type === "thinking" && typeof block.thinking === "string") {
        const text = this.unstreamed(this.state(key).thinking, block.thinking);
        if (text) events.push(withParent({ type: "reasoning", text }, parent));
      } else if (block.type === "tool_use") {
        events.push(...this.toolUse(block, parent));
      }
    }
    return events;
  }

  /** The part of a whole block that the deltas have not already emitted. */
  private unstreamed(streamed: Streamed, whole: string): string {
    const rest = streamed.text.slice(streamed.consumed);
    if (rest.length === 0) return whole;
    if (whole.startsWith(rest)) {
      streamed.consumed = streamed.text.length;
      return whole.slice(rest.length);
    }
    if (rest.startsWith(whole)) {
      streamed.consumed += whole.length;
      return "";
    }
    // The deltas and the block disagree: what streamed stands, nothing is sent twice.
    streamed.consumed = streamed.text.length;
    return "";
  }

  private toolUse(block: Json, parent: string | null): BridgeEvent[] {
    const id = str(block.id);
    const name = str(block.name);
    if (!id || !name) return [];
    const events: BridgeEvent[] = [];
    const questions = name === ASK_USER_QUESTION ? parseQuestions(block.input) : [];
    if (questions.length > 0) {
      if (!this.questionSent.has(id)) {
        this.questionSent.add(id);
        this.statusSent.add(id);
        if (this.questionsByRequest) this.questionsHeld.set(id, { questions, parent });
        else events.push(withParent({ type: "user_question", tool_use_id: id, questions }, parent));
      }
    } else {
      events.push(...this.status(id, name, parent));
    }
    if (!this.toolCallSent.has(id)) {
      this.toolCallSent.add(id);
      const kind = toolKind(name);
      this.openCalls.set(id, { name, kind, parent });
      events.push(
        withParent(
          {
            type: "tool_call",
            tool_use_id: id,
            tool_name: name,
            kind,
            normalized: normalizeToolCall(name, block.input, this.maxToolResultChars),
            input: block.input ?? {},
          },
          parent,
        ),
      );
    }
    return events;
  }

  private status(id: string, name: string, parent: string | null): BridgeEvent[] {
    if (this.statusSent.has(id)) return [];
    this.statusSent.add(id);
    return [
      withParent(
        { type: "status", message: toolStatusMessage(name), tool_name: name, tool_use_id: id },
        parent,
      ),
    ];
  }

  private user(line: Json, parent: string | null): BridgeEvent[] {
    const uuid = str(line.uuid);
    if (parent === null && uuid) this.pendingUuid = uuid;
    const message = isRecord(line.message) ? line.message : {};
    if (typeof message.content === "string") return this.localCommandOutput(line, message.content);
    if (!Array.isArray(message.content)) return [];
    const results = message.content.filter(
      (block) => isRecord(block) && block.type === "tool_result" && str(block.tool_use_id),
    ) as Json[];
    // The CLI's structured result (a command's stdout and stderr) belongs to the line's one result.
    const structured = results.length === 1 ? line.tool_use_result : undefined;
    return results.flatMap((block) => {
      const id = str(block.tool_use_id) as string;
      const isError = block.is_error === true;
      const text = toolResultText(block.content);
      const { content, truncated } = cut(text, this.maxToolResultChars);
      const events: BridgeEvent[] = [];
      const held = this.questionsHeld.get(id);
      if (held) {
        this.questionsHeld.delete(id);
        events.push(
          withParent(
            { type: "user_question", tool_use_id: id, questions: held.questions },
            held.parent,
          ),
        );
      }
      events.push(
        withParent(
          { type: "tool_result", tool_use_id: id, is_error: isError, content, truncated },
          parent,
        ),
      );
      const call = this.openCalls.get(id);
      if (call !== undefined) {
        this.openCalls.delete(id);
        const normalized = toolOutcome(
          call.name,
          { isError, text, structured },
          this.maxToolResultChars,
        );
        events.push(
          withParent(
            {
              type: "tool_update",
              tool_use_id: id,
              status: isError ? "error" : "complete",
              normalized,
            },
            call.parent,
          ),
        );
      }
      return events;
    });
  }

  /** A `tool_update` for each tool call the run ends without a result for (as complete). */
  private closeOpenCalls(): BridgeEvent[] {
    const events = [...this.openCalls].map(([id, call]) =>
      withParent(
        {
          type: "tool_update" as const,
          tool_use_id: id,
          status: "complete" as const,
          normalized: unfinishedOutcome(call.kind),
        },
        call.parent,
      ),
    );
    this.openCalls.clear();
    return events;
  }

  /**
   * What a local slash command printed (`/compact`: "Compacted"), which the CLI replays as a user
   * line and puts nowhere else: text for the user.
   */
  private localCommandOutput(line: Json, content: string): BridgeEvent[] {
    const output = line.isReplay === true ? LOCAL_COMMAND_OUTPUT.exec(content)?.[1]?.trim() : "";
    if (!output) return [];
    return [this.text(`replay:${str(line.uuid) ?? ""}`, output, null)];
  }

  private noteUsage(messageId: string, message: Json, parent: string | null): void {
    this.usage.report(messageId, message.usage, parent === null);
    if (parent !== null) return;
    this.lastMainMessage = messageId;
    this.lastModel = str(message.model) ?? this.lastModel;
  }

  /**
   * The context window before the result reports it: the model's documented one. The CLI gives
   * the model's own only in the result's `modelUsage`, so each run, a session's next one too,
   * starts from the documented window again (nothing carries the reported one between runs).
   */
  private windowSize(): number {
    return documentedWindow(this.initModel ?? this.lastModel);
  }

  private rateLimitInfo(line: Json): Record<string, unknown> {
    if (isRecord(line.rate_limit_info)) return line.rate_limit_info;
    const { type: _type, uuid: _uuid, session_id: _sid, ...rest } = line;
    return rest;
  }

  /** Why a run whose `result` says it failed did. */
  /**
   * The run's usage as its result reports it. A turn ended by an interrupt mid-stream may report
   * no tokens (its API call was aborted) though its messages did: those count then.
   */
  private resultUsage(line: Json): Usage {
    const u = isRecord(line.usage) ? line.usage : {};
    const reported: Usage = {
      input_tokens: int(u.input_tokens),
      output_tokens: int(u.output_tokens),
      cache_read_tokens: int(u.cache_read_input_tokens),
      cache_creation_tokens: int(u.cache_creation_input_tokens),
      num_turns: int(line.num_turns),
      duration_api_ms: int(line.duration_api_ms),
    };
    const tokens = (x: Usage) =>
      x.input_tokens + x.output_tokens + x.cache_read_tokens + x.cache_creation_tokens;
    if (tokens(reported) > 0) return reported;
    const streamed = this.usage.total();
    return tokens(streamed) > 0
      ? { ...streamed, duration_api_ms: reported.duration_api_ms }
      : reported;
  }

  private errorCode(subtype: string | undefined, notAuthenticated: boolean): CompletionErrorCode {
    // The CLI stopped at `--max-budget-usd`: the run's own cap, or what its key's budget had left.
    if (subtype === "error_max_budget_usd")
      return this.ownBudget ? "max_budget" : "budget_exhausted";
    if (subtype === "error_max_turns") return "max_turns";
    return notAuthenticated ? "agent_not_authenticated" : "agent_error";
  }

  private result(line: Json): BridgeEvent[] {
    this.finished = true;
    const subtype = str(line.subtype);
    const failed = line.is_error === true || (subtype !== undefined && subtype !== "success");
    const text = str(line.result);
    const events: BridgeEvent[] = [];
    // The CLI's text is only here (some slash commands): the user's all the same, once.
    if (!failed && text && !this.joiner.has("")) events.push(this.text("result", text, null));
    events.push(...this.closeOpenCalls());
    const used =
      this.lastMainMessage === undefined ? undefined : this.usage.contextUsed(this.lastMainMessage);
    if (used !== undefined) {
      const size = reportedWindow(line.modelUsage, this.lastModel) ?? this.windowSize();
      events.push(contextWindow(used, size));
    }
    const errors = Array.isArray(line.errors)
      ? line.errors.filter((e) => typeof e === "string")
      : [];
    const reported = text || errors.join("\n") || `claude CLI reported ${subtype ?? "an error"}`;
    const notAuthenticated = this.notAuthenticated || line.api_error_status === 401;
    const error = !failed
      ? null
      : notAuthenticated
        ? `${NOT_AUTHENTICATED} (the CLI said: ${reported})`
        : reported;
    const cost = runCost(line);
    events.push({
      type: "completion",
      status: failed ? "failed" : "succeeded",
      is_error: failed,
      result: failed ? null : (text ?? null),
      error,
      ...(failed ? { error_code: this.errorCode(subtype, notAuthenticated) } : {}),
      cost_usd: cost,
      duration_ms:
        typeof line.duration_ms === "number" ? int(line.duration_ms) : Math.round(this.elapsedMs()),
      usage: this.resultUsage(line),
      agent_session_id: str(line.session_id) ?? this.sessionId,
      claude_session_id: str(line.session_id) ?? this.sessionId,
      ...resumePoint(failed ? null : this.pendingUuid),
      ...this.dropped(),
    });
    return events;
  }
}

/** A completion's resume point: the last message of the run (and its deprecated alias). */
function resumePoint(uuid: string | null): {
  resume_at: string | null;
  last_message_uuid: string | null;
} {
  return { resume_at: uuid, last_message_uuid: uuid };
}
