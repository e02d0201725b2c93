import {
  bareCompletion,
  type CompletionErrorCode,
  type CompletionEvent,
  type CompletionStatusValue,
  type Usage,
} from "../../events.js";
import type { SDKResultMessage } from "./sdk-messages.js";
import { runCost, type UsageLedger } from "./usage.js";

// A Claude Code run's one `completion`: from its `result` line, or, for a run that ended without
// one, from what its messages reported. The uuid of the run's last main-thread message is its
// resume point only when a successful `result` confirms the turn: it is where a retry resumes the
// conversation, so it must never be the synthetic message of an API error, nor a turn the run did
// not finish.

/** What an operator does about a CLI without credentials: a run's error says it. */
const NOT_AUTHENTICATED =
  "the claude CLI has no valid credentials: set ANTHROPIC_API_KEY (or CLAUDE_CODE_OAUTH_TOKEN) in the server's environment and restart it, or log the CLI in as the user the server runs as";

/** What the mapper knows of the run when it ends. */
export interface RunSoFar {
  usage: UsageLedger;
  sessionId: string | null;
  /** Output lines dropped for being over the line bound: their events are missing. */
  droppedLines: number;
}

export interface ResultContext extends RunSoFar {
  /** The latest main-thread message's uuid. */
  lastUuid: string | null;
  /** The API refused the CLI's credentials, or it had none ("Not logged in"). */
  notAuthenticated: boolean;
  /** The run's `--max-budget-usd` is its own cap (see StreamMapperOptions). */
  ownBudget: boolean;
  /** Milliseconds since the run started, for a result without its duration. */
  elapsedMs: number;
}

export function resultFailed(line: SDKResultMessage): boolean {
  return line.is_error || (line.subtype !== undefined && line.subtype !== "success");
}

export function resultCompletion(line: SDKResultMessage, run: ResultContext): CompletionEvent {
  const failed = resultFailed(line);
  const { subtype, result: text } = line;
  const reported = text || line.errors.join("\n") || `claude CLI reported ${subtype ?? "an error"}`;
  const notAuthenticated = run.notAuthenticated || line.api_error_status === 401;
  const error = !failed
    ? null
    : notAuthenticated
      ? `${NOT_AUTHENTICATED} (the CLI said: ${reported})`
      : reported;
  const uuid = failed ? null : run.lastUuid;
  const sessionId = line.session_id ?? run.sessionId;
  return {
    type: "completion",
    status: failed ? "failed" : "succeeded",
    is_error: failed,
    result: failed ? null : (text ?? null),
    error,
    ...(failed ? { error_code: errorCode(subtype, notAuthenticated, run.ownBudget) } : {}),
    cost_usd: runCost(line),
    duration_ms: line.duration_ms ?? Math.round(run.elapsedMs),
    usage: resultUsage(line, run.usage),
    agent_session_id: sessionId,
    claude_session_id: sessionId,
    // The resume point, and its deprecated alias.
    resume_at: uuid,
    last_message_uuid: uuid,
    // What the model answered through the StructuredOutput tool; the run layer checks it.
    ...(line.structured_output === undefined ? {} : { structured_output: line.structured_output }),
    ...dropped(run),
  };
}

/** The completion of a run that ended without a result line. */
export function failureCompletion(
  status: CompletionStatusValue,
  error: string,
  errorCode: CompletionErrorCode,
  durationMs: number,
  run: RunSoFar,
): CompletionEvent {
  // What the messages reported, as no result says what the run spent; its cost is unknown
  // (the CLI prices a run only in its result) unless it spent nothing.
  const usage = run.usage.total();
  return {
    ...bareCompletion(status, error),
    error_code: errorCode,
    cost_usd: tokens(usage) > 0 ? null : 0,
    duration_ms: Math.max(0, Math.round(durationMs)),
    usage,
    agent_session_id: run.sessionId,
    claude_session_id: run.sessionId,
    ...dropped(run),
  };
}

function dropped(run: RunSoFar): { dropped_lines?: number } {
  return run.droppedLines > 0 ? { dropped_lines: run.droppedLines } : {};
}

const tokens = (x: Usage) =>
  x.input_tokens + x.output_tokens + x.cache_read_tokens + x.cache_creation_tokens;

/**
 * The run's usage as its result reports it. A turn ended by an interrupt mid-stream may report
 * no tokens (its API call was aborted) though its messages did: those count then.
 */
function resultUsage(line: SDKResultMessage, ledger: UsageLedger): Usage {
  const reported: Usage = {
    input_tokens: line.usage.input_tokens,
    output_tokens: line.usage.output_tokens,
    cache_read_tokens: line.usage.cache_read_input_tokens,
    cache_creation_tokens: line.usage.cache_creation_input_tokens,
    num_turns: line.num_turns,
    duration_api_ms: line.duration_api_ms,
  };
  if (tokens(reported) > 0) return reported;
  const streamed = ledger.total();
  return tokens(streamed) > 0
    ? { ...streamed, duration_api_ms: reported.duration_api_ms }
    : reported;
}

/** Why a run whose `result` says it failed did. */
function errorCode(
  subtype: string | undefined,
  notAuthenticated: boolean,
  ownBudget: boolean,
): CompletionErrorCode {
  // The CLI stopped at `--max-budget-usd`: the run's own cap, or what its key's budget had left.
  if (subtype === "error_max_budget_usd") return ownBudget ? "max_budget" : "budget_exhausted";
  if (subtype === "error_max_turns") return "max_turns";
  return notAuthenticated ? "agent_not_authenticated" : "agent_error";
}
