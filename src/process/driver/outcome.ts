import type { CompletionEvent } from "../../events.js";
import {
  AgentExitError,
  type AgentLabel,
  AgentNoResultError,
  RunCancelledError,
  RunnerError,
} from "../errors.js";

// Why a run ended when its CLI did not say (./drive.ts): stopped by the bridge or a client, or
// gone without its outcome.

/**
 * Why the run's signal stopped it: the RunnerError it was aborted with (the bridge interrupting
 * it), else a client's cancel.
 */
export function abortError(signal: AbortSignal | undefined): RunnerError {
  return signal?.reason instanceof RunnerError ? signal.reason : new RunCancelledError();
}

/** Why a CLI that ended without its outcome failed: by its exit code, else for the missing result. */
export function noOutcomeError(
  label: AgentLabel,
  exit: { code: number | null; signal: NodeJS.Signals | null } | undefined,
  stderrTail: string,
): RunnerError {
  return exit === undefined || exit.code === 0
    ? new AgentNoResultError(label, stderrTail)
    : new AgentExitError(label, exit.code, exit.signal, stderrTail);
}

/**
 * The outcome the CLI reported after it was asked to end its turn, as the run's: ended by `err`
 * (a timeout, a stall), with what the CLI reported it spent.
 */
export function endedBy(completion: CompletionEvent, err: RunnerError): CompletionEvent {
  return {
    ...completion,
    status: err.status,
    is_error: true,
    error: err.message,
    error_code: err.code,
  };
}
