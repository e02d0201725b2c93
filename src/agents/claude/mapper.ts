import type {
  BridgeEvent,
  CompletionErrorCode,
  CompletionEvent,
  CompletionStatusValue,
  UserQuestion,
} from "../../events.js";
import { DEFAULT_MAX_TOOL_RESULT_CHARS, type Json } from "../line-fields.js";
import { failureCompletion, resultCompletion, resultFailed } from "./completion.js";
import type { CommandInfo } from "./hooks.js";
import { readLine } from "./sdk-lines.js";
import type {
  SDKApiMessage,
  SDKAssistantMessage,
  SDKMessage,
  SDKPartialAssistantMessage,
  SDKResultMessage,
  SDKUserMessage,
} from "./sdk-messages.js";
import { StreamedText } from "./streamed-text.js";
import { apiRetryStatus, initEvents, rateLimitStatus } from "./system-lines.js";
import { ToolUses, withParent } from "./tool-uses.js";
import { ASK_USER_QUESTION } from "./tools.js";
import { contextWindow, documentedWindow, reportedWindow, UsageLedger } from "./usage.js";

// Turns the CLI's stream-json lines (already parsed) into BridgeEvents. Pure and synchronous:
// feed it lines in order with `push`, which narrows each to its SDKMessage (sdk-lines.ts); the
// `result` line yields the `completion` (completion.ts), after which the mapper is done.
// `control_request` lines are the runner's business (see control.ts), except that
// `questionFromControl` lets it emit a question the mapper has not emitted yet.
//
// Text: deltas become `text_delta` at once, and whole blocks add what the deltas did not carry
// (streamed-text.ts); thinking works the same way, as `reasoning`. Only the main thread's text is
// `text_delta` (what the agent says to the user); a subagent's (a line with
// `parent_tool_use_id`) is `subagent_text_delta`. Text that comes only in the `result` (some
// slash commands) or as a local command's output (`/compact`) is emitted as `text_delta` too.
// Tools: status, question, call, result and update of each tool use (tool-uses.ts).
// The init line gives `session_status` and `available_commands`; each main-thread message's end
// (its `message_delta`) a `context_window`; API retries and rate limits a `status` (system-lines.ts).

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

export class StreamMapper {
  private readonly elapsedMs: () => number;
  private readonly ownBudget: boolean;
  private readonly resumed: boolean;
  private sessionId: string | null = null;
  /** The latest main-thread message's uuid: the run's last message once a result confirms it. */
  private pendingUuid: string | null = null;
  private initSeen = false;
  /** The slash commands as the answer to `initialize` describes them (hooks.ts). */
  private commands: ReadonlyMap<string, CommandInfo> = new Map();
  private text = new StreamedText();
  private readonly tools: ToolUses;
  private usage = new UsageLedger();
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
    this.tools = new ToolUses(
      options.maxToolResultChars ?? DEFAULT_MAX_TOOL_RESULT_CHARS,
      options.questionsByRequest ?? false,
    );
    this.elapsedMs = options.elapsedMs ?? (() => 0);
    this.ownBudget = options.ownBudget ?? false;
    this.resumed = options.resumed ?? false;
  }

  /**
   * The CLI goes on after its result with another turn (a client's input, steering.ts): the
   * lines after it are mapped again, the new turn's usage counted apart from the last's (which
   * its completion holds).
   */
  nextTurn(): void {
    this.finished = false;
    this.usage = new UsageLedger();
    // The text goes on: the next turn's first words start a new paragraph, as a later message's do.
  }

  /** True once the `result` line has produced the completion. */
  get done(): boolean {
    return this.finished;
  }

  push(line: Json): BridgeEvent[] {
    if (this.finished) return [];
    const message = readLine(line);
    if (message.session_id) this.sessionId = message.session_id;
    return this.map(message);
  }

  /**
   * A `user_question` for an AskUserQuestion permission request, unless the tool_use block has
   * already produced it (so a question is emitted exactly once, whichever comes first).
   */
  questionFromControl(toolUseId: string, questions: UserQuestion[]): UserQuestionEvent | undefined {
    return this.tools.questionFromControl(toolUseId, questions);
  }

  /**
   * The run layer streams this question with its permission request (questionsByRequest), so the
   * mapper never will; returns the subagent's call it comes from (its Task tool use), if any.
   */
  questionRequested(toolUseId: string): string | null {
    return this.tools.questionRequested(toolUseId);
  }

  /** Counts a line of the CLI's output that was dropped (over the line bound) in the completion. */
  /** What the answer to `initialize` says of the slash commands (it comes before the init line). */
  describeCommands(commands: ReadonlyMap<string, CommandInfo>): void {
    this.commands = commands;
  }

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
    return failureCompletion(status, error, errorCode, durationMs, this.runSoFar());
  }

  private map(message: SDKMessage): BridgeEvent[] {
    switch (message.type) {
      case "stream_event":
        return this.streamEvent(message);
      case "assistant":
        return this.assistant(message);
      case "user":
        return this.user(message);
      case "rate_limit_event": {
        const info = message.rate_limit_info;
        const status = rateLimitStatus(info);
        return [{ type: "rate_limit", info }, ...(status ? [status] : [])];
      }
      case "system":
        if (message.subtype === "api_retry") return [apiRetryStatus(message)];
        // Once: the CLI may send it again within a run (after compacting).
        if (this.initSeen) return [];
        this.initSeen = true;
        this.initModel = message.model;
        this.tools.setWorkDir(message.cwd);
        return initEvents(message, this.resumed, this.commands);
      case "result":
        return this.result(message);
      default:
        // Control lines, keep-alives, other system lines (status, tasks, hooks…): internal.
        return [];
    }
  }

  private streamEvent({
    event,
    parent_tool_use_id: parent,
    api_message_id,
  }: SDKPartialAssistantMessage): BridgeEvent[] {
    const scope = parent ?? "";
    switch (event.type) {
      case "message_start": {
        const id = event.message.id ?? api_message_id;
        this.text.start(scope, id);
        if (id !== undefined) this.noteUsage(id, event.message, parent);
        return [];
      }
      case "content_block_start": {
        const { type, id, name } = event.content_block;
        // AskUserQuestion waits for its complete input: it may be a question, not a status.
        if (type !== "tool_use" || !id || !name || name === ASK_USER_QUESTION) return [];
        return this.tools.status(id, name, parent);
      }
      case "content_block_delta": {
        const key = this.text.key(scope, api_message_id);
        const { delta } = event;
        if (delta.type === "text_delta") {
          this.text.delta(key, "text", delta.text);
          return [this.text.event(key, delta.text, parent)];
        }
        this.text.delta(key, "thinking", delta.thinking);
        return [withParent({ type: "reasoning", text: delta.thinking }, parent)];
      }
      case "message_delta": {
        // The message's end: its final usage, and so how full the context is after it.
        const key = this.text.key(scope, api_message_id);
        this.usage.report(key, event.usage, parent === null);
        const used = parent === null ? this.usage.contextUsed(key) : undefined;
        return used === undefined ? [] : [contextWindow(used, this.windowSize())];
      }
    }
  }

  private assistant(line: SDKAssistantMessage): BridgeEvent[] {
    const { message, parent_tool_use_id: parent } = line;
    // An API error comes as a synthetic assistant message; its text is the completion's error,
    // not something the model said, and it is no message to resume the conversation at.
    if (line.is_api_error_message) {
      if (line.error === "authentication_failed") this.notAuthenticated = true;
      return [];
    }
    if (parent === null && line.uuid) this.pendingUuid = line.uuid;
    const key = this.text.key(parent ?? "", message.id);
    if (message.model !== "<synthetic>") this.noteUsage(key, message, parent);
    const events: BridgeEvent[] = [];
    for (const block of message.content) {
      if (block.type === "text") {
        const text = this.text.unstreamed(key, "text", block.text);
        if (text) events.push(this.text.event(key, text, parent));
      } else if (block.type === "thinking") {
        const text = this.text.unstreamed(key, "thinking", block.thinking);
        if (text) events.push(withParent({ type: "reasoning", text }, parent));
      } else {
        events.push(...this.tools.block(block, parent));
      }
    }
    return events;
  }

  private user(line: SDKUserMessage): BridgeEvent[] {
    // The CLI's own words to the model, not the conversation's: nothing to show, nor to resume at.
    if (line.isSynthetic) return [];
    if (line.parent_tool_use_id === null && line.uuid) this.pendingUuid = line.uuid;
    const { content } = line.message;
    if (typeof content === "string") return this.localCommandOutput(line, content);
    return content === undefined ? [] : this.tools.results(line, content);
  }

  /**
   * What a local slash command printed (`/compact`: "Compacted"), which the CLI replays as a user
   * line and puts nowhere else: text for the user.
   */
  private localCommandOutput(line: SDKUserMessage, content: string): BridgeEvent[] {
    const output = line.isReplay ? LOCAL_COMMAND_OUTPUT.exec(content)?.[1]?.trim() : "";
    if (!output) return [];
    return [this.text.event(`replay:${line.uuid ?? ""}`, output, null)];
  }

  private noteUsage(messageId: string, message: SDKApiMessage, parent: string | null): void {
    this.usage.report(messageId, message.usage, parent === null);
    if (parent !== null) return;
    this.lastMainMessage = messageId;
    this.lastModel = message.model ?? this.lastModel;
  }

  /**
   * The context window before the result reports it: the model's documented one. The CLI gives
   * the model's own only in the result's `modelUsage`, so each run, a session's next one too,
   * starts from the documented window again (nothing carries the reported one between runs).
   */
  private windowSize(): number {
    return documentedWindow(this.initModel ?? this.lastModel);
  }

  private runSoFar() {
    return { usage: this.usage, sessionId: this.sessionId, droppedLines: this.droppedLines };
  }

  private result(line: SDKResultMessage): BridgeEvent[] {
    this.finished = true;
    const events: BridgeEvent[] = [];
    // The CLI's text is only here (some slash commands): the user's all the same, once.
    if (!resultFailed(line) && line.result && !this.text.mainSpoke) {
      events.push(this.text.event("result", line.result, null));
    }
    events.push(...this.tools.closeOpen());
    const used =
      this.lastMainMessage === undefined ? undefined : this.usage.contextUsed(this.lastMainMessage);
    if (used !== undefined) {
      const size = reportedWindow(line.modelUsage, this.lastModel) ?? this.windowSize();
      events.push(contextWindow(used, size));
    }
    events.push(
      resultCompletion(line, {
        usage: this.usage,
        sessionId: this.sessionId,
        droppedLines: this.droppedLines,
        lastUuid: this.pendingUuid,
        notAuthenticated: this.notAuthenticated,
        ownBudget: this.ownBudget,
        elapsedMs: this.elapsedMs(),
      }),
    );
    return events;
  }
}
