// What the run manager refuses, as types the HTTP layer turns into status codes.

export class SessionBusyError extends Error {
  constructor(readonly activeRunId: string) {
    super(`the session already has an active run (${activeRunId})`);
  }
}

export class QueueFullError extends Error {
  constructor(
    readonly limit: number,
    readonly retryAfterSeconds: number,
  ) {
    super(`all ${limit} run slots and queue places are taken`);
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

export class ShuttingDownError extends Error {
  constructor() {
    super("the server is shutting down and takes no new runs");
  }
}

export class IdempotencyConflictError extends Error {
  constructor(readonly runId: string) {
    super(`this Idempotency-Key was already used with a different request (run ${runId})`);
  }
}

export class RunFinishedError extends Error {
  constructor(
    readonly runId: string,
    readonly status: string,
  ) {
    super(`run ${runId} has already finished (${status})`);
  }
}

export class KeyRunLimitError extends Error {
  constructor(
    readonly limit: number,
    readonly retryAfterSeconds: number,
  ) {
    super(`this API key already has ${limit} runs active or queued, its limit`);
  }
}

export class SessionExpiredError extends Error {
  constructor(readonly sessionId: string) {
    super(`session ${sessionId} has expired and takes no more messages; create a new one`);
  }
}

/** The session was deleted while the message was on its way in. */
export class SessionGoneError extends Error {
  constructor(readonly sessionId: string) {
    super(`No session with id ${sessionId}`);
  }
}

/** A retry of a run that is not its session's newest: only the last turn can be retried. */
export class RunNotLatestError extends Error {
  constructor(
    readonly runId: string,
    readonly latestRunId: string,
  ) {
    super(
      `run ${runId} is not its session's latest run (${latestRunId} is): only the latest run can be retried`,
    );
  }
}

export class PermissionRequestNotFoundError extends Error {
  constructor(
    readonly runId: string,
    readonly requestId: string,
  ) {
    super(`run ${runId} has no permission request ${requestId}`);
  }
}

/** The request was answered, expired or withdrawn: it takes no (other) answer. */
export class PermissionRequestResolvedError extends Error {
  constructor(
    readonly requestId: string,
    readonly state: string,
  ) {
    super(`permission request ${requestId} is no longer pending (${state})`);
  }
}

/** An answer of the wrong kind: `answers` to a tool's request, or an allow without them to a question. */
export class PermissionAnswerMismatchError extends Error {
  constructor(
    readonly field: "answers" | "decision",
    message: string,
  ) {
    super(message);
  }
}

/** The session's worktree is on the disk of a host where no instance runs any more. */
export class WorktreeHostGoneError extends Error {
  constructor(
    readonly sessionId: string,
    readonly host: string,
  ) {
    super(
      `session ${sessionId} works in a git worktree on host ${host}, where no instance of the server runs now; start one there, or create a new session`,
    );
  }
}
