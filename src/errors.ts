// What the service refuses, by a stable code a client can switch on. Any layer throws these; only
// the HTTP layer's one table (src/http/error-map.ts) says which status and title a code has.

/** Every code the service answers with. */
export type ErrorCode =
  | "validation_failed"
  | "malformed_json"
  | "unsupported_media_type"
  | "payload_too_large"
  | "not_found"
  | "unauthorized"
  | "forbidden"
  | "policy_denied"
  | "budget_exhausted"
  | "too_many_streams"
  | "rate_limited"
  | "key_not_found"
  | "sandbox_required"
  | "work_dir_not_allowed"
  | "session_not_found"
  | "run_not_found"
  | "permission_request_not_found"
  | "permission_request_resolved"
  | "hook_not_found"
  | "hook_exists"
  | "invalid_signature"
  | "prompt_empty"
  | "prompt_too_large"
  | "checkout_unavailable"
  | "session_busy"
  | "session_expired"
  | "worktree_unavailable"
  | "worktree_dirty"
  | "worktree_host_gone"
  | "not_a_worktree_session"
  | "worktree_not_found"
  | "worktree_removed"
  | "worktree_elsewhere"
  | "run_finished"
  | "run_not_latest"
  | "retry_unsupported"
  | "fork_unsupported"
  | "run_not_finished"
  | "no_fork_point"
  | "input_unsupported"
  | "control_unsupported"
  | "run_not_running"
  | "control_failed"
  | "agent_no_answer"
  | "queue_full"
  | "idempotency_key_reused"
  | "shutting_down"
  | "agent_unavailable"
  | "forge_unavailable"
  | "invalid_cursor"
  | "method_not_allowed"
  | "not_ready"
  | "database_unavailable"
  | "internal_error";

/** One part of a request at fault: where it is, which field, and what is wrong with it. */
export interface ValidationIssue {
  location: "body" | "query" | "path" | "header";
  path: string;
  message: string;
}

/** What a refusal tells a client beyond its code and message. */
export interface DomainErrorExtra {
  /** The detail a client is shown, where it says more than the message (what to do next). */
  detail?: string;
  /** When the same request may succeed. */
  retryAfterSeconds?: number;
  /** Each part of the request at fault. */
  errors?: ValidationIssue[];
  /** The run in the way, for the client to follow. */
  activeRunId?: string;
}

/** A refusal whose message is written for the client: it holds nothing of the server's. */
export class DomainError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly extra: DomainErrorExtra = {},
  ) {
    super(message);
  }

  get detail(): string {
    return this.extra.detail ?? this.message;
  }
}

const NOT_FOUND = {
  session: { code: "session_not_found", detail: (id: string) => `No session with id ${id}` },
  run: { code: "run_not_found", detail: (id: string) => `No run with id ${id}` },
  key: { code: "key_not_found", detail: (id: string) => `No API key with id ${id}` },
  hook: {
    code: "hook_not_found",
    detail: (name: string) => `No hook named ${JSON.stringify(name)}`,
  },
} as const;

/** A thing the request names that does not exist (or that its key may not see). */
export class NotFoundError extends DomainError {
  constructor(kind: keyof typeof NOT_FOUND, id: string) {
    super(NOT_FOUND[kind].code, NOT_FOUND[kind].detail(id));
  }
}

/** The request's own fields refused: every issue listed, and each named in the detail. */
export class InvalidRequestError extends DomainError {
  constructor(issues: ValidationIssue[]) {
    const detail = issues
      .map((e) =>
        e.path ? `${e.location} ${e.path}: ${e.message}` : `${e.location}: ${e.message}`,
      )
      .join("; ");
    super("validation_failed", detail, { errors: issues });
  }
}
