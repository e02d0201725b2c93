import { DomainError, InvalidRequestError, NotFoundError } from "../errors.js";

// What the run manager refuses, each with its code (the HTTP layer maps codes to statuses).

export class SessionBusyError extends DomainError {
  constructor(readonly activeRunId: string) {
    super("session_busy", `the session already has an active run (${activeRunId})`, {
      activeRunId,
    });
  }
}

export class QueueFullError extends DomainError {
  constructor(
    readonly limit: number,
    readonly retryAfterSeconds: number,
  ) {
    const message = `all ${limit} run slots and queue places are taken`;
    super("queue_full", message, { detail: `${message}; retry later`, retryAfterSeconds });
  }
}

/** Shutdown could not store every completion: the runs are left to the instance's recovery. */
export class CompletionsUnstoredError extends Error {
  constructor(readonly runIds: readonly string[]) {
    super(
      `the completions of ${runIds.length} runs could not be stored; their runs are left to recovery`,
    );
  }
}

export class ShuttingDownError extends DomainError {
  constructor() {
    super("shutting_down", "the server is shutting down and takes no new runs");
  }
}

export class IdempotencyConflictError extends DomainError {
  constructor(readonly runId: string) {
    super(
      "idempotency_key_reused",
      `this Idempotency-Key was already used with a different request (run ${runId})`,
    );
  }
}

export class RunFinishedError extends DomainError {
  constructor(
    readonly runId: string,
    readonly status: string,
  ) {
    super("run_finished", `run ${runId} has already finished (${status})`);
  }
}

export class KeyRunLimitError extends DomainError {
  constructor(
    readonly limit: number,
    readonly retryAfterSeconds: number,
  ) {
    const message = `this API key already has ${limit} runs active or queued, its limit`;
    super("rate_limited", message, { detail: `${message}; retry later`, retryAfterSeconds });
  }
}

export class SessionExpiredError extends DomainError {
  constructor(readonly sessionId: string) {
    super(
      "session_expired",
      `session ${sessionId} has expired and takes no more messages; create a new one`,
    );
  }
}

/** The session was deleted while the message was on its way in. */
export class SessionGoneError extends NotFoundError {
  constructor(readonly sessionId: string) {
    super("session", sessionId);
  }
}

/** A retry of a run that is not its session's newest: only the last turn can be retried. */
export class RunNotLatestError extends DomainError {
  constructor(
    readonly runId: string,
    readonly latestRunId: string,
  ) {
    super(
      "run_not_latest",
      `run ${runId} is not its session's latest run (${latestRunId} is): only the latest run can be retried`,
    );
  }
}

export class PermissionRequestNotFoundError extends DomainError {
  constructor(
    readonly runId: string,
    readonly requestId: string,
  ) {
    super("permission_request_not_found", `run ${runId} has no permission request ${requestId}`);
  }
}

/** The request was answered, expired or withdrawn: it takes no (other) answer. */
export class PermissionRequestResolvedError extends DomainError {
  constructor(
    readonly requestId: string,
    readonly state: string,
  ) {
    super(
      "permission_request_resolved",
      `permission request ${requestId} is no longer pending (${state})`,
    );
  }
}

/** An answer of the wrong kind: `answers` to a tool's request, or an allow without them to a question. */
export class PermissionAnswerMismatchError extends InvalidRequestError {
  constructor(
    readonly field: "answers" | "decision",
    message: string,
  ) {
    super([{ location: "body", path: field, message }]);
  }
}

/** A run's pull (merge) request head could not be checked out: the run does not start. */
export class ChangeCheckoutError extends DomainError {
  constructor(what: string) {
    super(
      "worktree_unavailable",
      `${what} could not be checked out from the hook's origin; the server's log says why`,
    );
  }
}

/** The session's worktree is on the disk of a host where no instance runs any more. */
export class WorktreeHostGoneError extends DomainError {
  constructor(
    readonly sessionId: string,
    readonly host: string,
  ) {
    super(
      "worktree_host_gone",
      `session ${sessionId} works in a git worktree on host ${host}, where no instance of the server runs now; start one there, or create a new session`,
    );
  }
}

/** The run's agent cannot be steered while it runs (codex exec reads its prompt to EOF). */
export class SteeringUnsupportedError extends DomainError {
  constructor(what: "input" | "control", agent: string) {
    super(
      what === "input" ? "input_unsupported" : "control_unsupported",
      what === "input"
        ? `the ${agent} agent takes no input while a run runs: send a message once the run has finished`
        : `the ${agent} agent cannot switch its model or permission mode while a run runs`,
    );
  }
}

/** Waiting or queued, or its agent still starting: nothing can be written to it yet. */
export class RunNotRunningError extends DomainError {
  constructor(
    readonly runId: string,
    readonly state: string,
  ) {
    super(
      "run_not_running",
      `run ${runId} is ${state}: its agent is not running yet; follow its events and try again once it has started`,
    );
  }
}

/** The agent answered a switch with an error. */
export class ControlFailedError extends DomainError {
  constructor(error: string) {
    super("control_failed", `the agent refused the switch: ${error}`);
  }
}

/** The agent (or the instance that runs it) did not answer within the bound. */
export class AgentNoAnswerError extends DomainError {
  constructor(message: string) {
    super("agent_no_answer", message);
  }
}
