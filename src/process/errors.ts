import type { CompletionErrorCode, CompletionStatusValue } from "../events.js";

// Every way an agent's run can end without its own outcome has one error class here. The process
// driver turns any of them into the run's single `completion` (status and message come from the
// error), so the wording a client sees is decided in this one file, for every back-end.

/** Which agent CLI a message is about: its name, and the variable that sets its binary. */
export interface AgentLabel {
  /** As the messages name it: "claude", "codex". */
  name: string;
  /** The configuration variable of its binary, e.g. AGENT_BRIDGE_CLAUDE_BIN. */
  binVariable: string;
}

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

export class AgentNotFoundError extends RunnerError {
  readonly status = "failed";
  override readonly name = "AgentNotFoundError";
  readonly code = "agent_not_found";
  // The path is the server's: it goes to the server's log (see driver/start-child.ts), not to the client.
  constructor(label: AgentLabel) {
    super(`${label.name} CLI not found (${label.binVariable}); the server's log names the path`);
  }
}

/** The bridge could not make the session's git worktree (the server's log says why). */
export class WorktreeUnavailableError extends RunnerError {
  readonly status = "failed";
  override readonly name = "WorktreeUnavailableError";
  readonly code = "work_dir_not_found";
  constructor() {
    super("the session's git worktree could not be made; the server's log says why");
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

/** The CLI has no credentials it may use here; the message says what the operator must give. */
export class AgentNotAuthenticatedError extends RunnerError {
  readonly status = "failed";
  override readonly name = "AgentNotAuthenticatedError";
  readonly code = "agent_not_authenticated";
}

export class AgentSpawnError extends RunnerError {
  readonly status = "failed";
  override readonly name = "AgentSpawnError";
  readonly code = "agent_start_failed";
  constructor(label: AgentLabel, cause: Error) {
    super(
      `could not start ${label.name} CLI (${(cause as NodeJS.ErrnoException).code ?? "error"}); the server's log says why`,
      { cause },
    );
  }
}

/** The process ended (by exit code or signal) before it wrote a `result` line. */
export class AgentExitError extends RunnerError {
  readonly status = "failed";
  override readonly name = "AgentExitError";
  readonly code = "agent_exited";
  constructor(
    label: AgentLabel,
    readonly exitCode: number | null,
    readonly signal: NodeJS.Signals | null,
    stderrTail: string,
  ) {
    super(
      withTail(
        exitCode !== null
          ? `${label.name} CLI exited with code ${exitCode}`
          : `${label.name} CLI was killed by signal ${signal ?? "unknown"}`,
        stderrTail,
      ),
    );
  }
}

/** Exit code 0, but the CLI never reported its outcome. */
export class AgentNoResultError extends RunnerError {
  readonly status = "failed";
  override readonly name = "AgentNoResultError";
  readonly code = "agent_exited";
  constructor(label: AgentLabel, stderrTail: string) {
    super(withTail(`${label.name} CLI ended before emitting a result`, stderrTail));
  }
}

export class AgentTimeoutError extends RunnerError {
  readonly status = "timed_out";
  override readonly name = "AgentTimeoutError";
  readonly code = "timed_out";
  constructor(label: AgentLabel, timeoutMs: number) {
    super(`${label.name} CLI timed out after ${seconds(timeoutMs)}`);
  }
}

export class AgentStalledError extends RunnerError {
  readonly status = "failed";
  override readonly name = "AgentStalledError";
  readonly code = "agent_stalled";
  constructor(label: AgentLabel, idleMs: number) {
    super(`${label.name} CLI stalled: no output for ${seconds(idleMs)}`);
  }
}

export class RunCancelledError extends RunnerError {
  readonly status = "cancelled";
  override readonly name = "RunCancelledError";
  readonly code = "cancelled";
  constructor() {
    super("run cancelled");
  }
}

/**
 * The bridge stopped the run for a reason of its own, not a client's (its server shut down, its
 * instance lost its lease): the reason its run's abort signal carries.
 */
export class RunInterruptedError extends RunnerError {
  readonly status = "interrupted";
  override readonly name = "RunInterruptedError";
  readonly code = "interrupted";
}

/** The run hit one of its limits (src/process/run-limits.ts) and was stopped at once. */
export abstract class RunLimitError extends RunnerError {
  readonly status = "failed";
}

export class MemoryLimitError extends RunLimitError {
  override readonly name = "MemoryLimitError";
  readonly code = "memory_limit";
  constructor(limitBytes: number) {
    super(
      `the run went over its memory limit of ${limitBytes / (1024 * 1024)} MiB: the kernel killed one of its processes, and the bridge stopped the run`,
    );
  }
}

export class ProcessLimitError extends RunLimitError {
  override readonly name = "ProcessLimitError";
  readonly code = "process_limit";
  constructor(maxProcesses: number) {
    super(
      `the run reached its limit of ${maxProcesses} processes: a fork failed, and the bridge stopped the run`,
    );
  }
}
