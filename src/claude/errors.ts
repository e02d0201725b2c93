import type { CompletionErrorCode, CompletionStatusValue } from "../events.js";

// Every way a run can end without a usable `result` line has one error class here. The runner
// turns any of them into the run's single `completion` (status and message come from the error),
// so the wording a client sees is decided in this one file.

export abstract class RunnerError extends Error {
  abstract readonly status: CompletionStatusValue;
  /** The completion's `error_code`: what a client can act on without parsing the message. */
  abstract readonly code: CompletionErrorCode;
}

function seconds(ms: number): string {
  const s = ms / 1000;
  return Number.isInteger(s) ? `${s}s` : `${s.toFixed(1)}s`;
}

function withTail(message: string, stderrTail: string): string {
  const tail = stderrTail.trim();
  return tail.length > 0 ? `${message}\n${tail}` : message;
}

/** The run request cannot be turned into a safe command line. */
export class InvalidRunRequestError extends RunnerError {
  readonly status = "failed";
  override readonly name = "InvalidRunRequestError";
  readonly code = "invalid_run_request";
}

export class ClaudeNotFoundError extends RunnerError {
  readonly status = "failed";
  override readonly name = "ClaudeNotFoundError";
  readonly code = "agent_not_found";
  // The path is the server's: it goes to the server's log (see runner.ts), not to the client.
  constructor(readonly path: string) {
    super("claude CLI not found (AGENT_BRIDGE_CLAUDE_BIN); the server's log names the path");
  }
}

/** The working directory is missing: spawn reports ENOENT then too, so it gets its own message. */
export class WorkDirNotFoundError extends RunnerError {
  readonly status = "failed";
  override readonly name = "WorkDirNotFoundError";
  readonly code = "work_dir_not_found";
  constructor(readonly cwd: string) {
    super("the session's working directory does not exist");
  }
}

export class ClaudeSpawnError extends RunnerError {
  readonly status = "failed";
  override readonly name = "ClaudeSpawnError";
  readonly code = "agent_start_failed";
  constructor(
    readonly path: string,
    cause: Error,
  ) {
    super(
      `could not start claude CLI (${(cause as NodeJS.ErrnoException).code ?? "error"}); the server's log says why`,
      { cause },
    );
  }
}

/** The process ended (by exit code or signal) before it wrote a `result` line. */
export class ClaudeExitError extends RunnerError {
  readonly status = "failed";
  override readonly name = "ClaudeExitError";
  readonly code = "agent_exited";
  constructor(
    readonly exitCode: number | null,
    readonly signal: NodeJS.Signals | null,
    readonly stderrTail: string,
  ) {
    super(
      withTail(
        exitCode !== null
          ? `claude CLI exited with code ${exitCode}`
          : `claude CLI was killed by signal ${signal ?? "unknown"}`,
        stderrTail,
      ),
    );
  }
}

/** Exit code 0, but no `result` line was ever written. */
export class ClaudeNoResultError extends RunnerError {
  readonly status = "failed";
  override readonly name = "ClaudeNoResultError";
  readonly code = "agent_exited";
  constructor(readonly stderrTail: string) {
    super(withTail("claude CLI ended before emitting a result", stderrTail));
  }
}

export class ClaudeTimeoutError extends RunnerError {
  readonly status = "timed_out";
  override readonly name = "ClaudeTimeoutError";
  readonly code = "timed_out";
  constructor(readonly timeoutMs: number) {
    super(`claude CLI timed out after ${seconds(timeoutMs)}`);
  }
}

export class ClaudeStalledError extends RunnerError {
  readonly status = "failed";
  override readonly name = "ClaudeStalledError";
  readonly code = "agent_stalled";
  constructor(readonly idleMs: number) {
    super(`claude CLI stalled: no output for ${seconds(idleMs)}`);
  }
}

export class ClaudeCancelledError extends RunnerError {
  readonly status = "cancelled";
  override readonly name = "ClaudeCancelledError";
  readonly code = "cancelled";
  constructor() {
    super("run cancelled");
  }
}
