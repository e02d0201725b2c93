import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { ErrorCode } from "../errors.js";

// The one place that says what each code is in HTTP. A code has one status: where two statuses
// mean two things, they are two codes.

export interface HttpProblem {
  status: ContentfulStatusCode;
  title: string;
  /** Sent with every answer of the code. */
  headers?: Record<string, string>;
}

export const ERROR_MAP: Record<ErrorCode, HttpProblem> = {
  validation_failed: { status: 400, title: "Request validation failed" },
  malformed_json: { status: 400, title: "Malformed JSON body" },
  unsupported_media_type: { status: 415, title: "Unsupported media type" },
  payload_too_large: { status: 413, title: "Payload too large" },
  not_found: { status: 404, title: "Not found" },
  unauthorized: {
    status: 401,
    title: "Missing or invalid API key",
    headers: { "WWW-Authenticate": 'Bearer realm="agent-bridge"' },
  },
  forbidden: { status: 403, title: "Not allowed for this key" },
  policy_denied: { status: 403, title: "Not allowed by the key's policy" },
  budget_exhausted: { status: 402, title: "The key's monthly budget is spent" },
  too_many_streams: { status: 429, title: "Too many open event streams for this key" },
  rate_limited: { status: 429, title: "Too many requests for this key" },
  key_not_found: { status: 404, title: "API key not found" },
  sandbox_required: { status: 409, title: "Another tenant's key needs a sandbox" },
  work_dir_not_allowed: { status: 400, title: "Work directory not allowed" },
  session_not_found: { status: 404, title: "Session not found" },
  run_not_found: { status: 404, title: "Run not found" },
  permission_request_not_found: { status: 404, title: "Permission request not found" },
  permission_request_resolved: { status: 409, title: "Permission request no longer pending" },
  hook_not_found: { status: 404, title: "Hook not found" },
  hook_exists: { status: 409, title: "Hook exists" },
  invalid_signature: { status: 401, title: "Delivery signature does not verify" },
  prompt_empty: { status: 422, title: "Hook prompt rendered empty" },
  prompt_too_large: { status: 422, title: "Hook prompt rendered too large" },
  checkout_unavailable: { status: 422, title: "Delivery names no pull request to check out" },
  session_busy: { status: 409, title: "Session has an active run" },
  session_expired: { status: 410, title: "Session expired" },
  worktree_unavailable: { status: 400, title: "Worktree mode unavailable" },
  worktree_dirty: { status: 409, title: "Worktree has uncommitted changes" },
  worktree_host_gone: { status: 409, title: "The session's worktree host has no live instance" },
  not_a_worktree_session: { status: 409, title: "The session has no worktree of its own" },
  worktree_not_found: { status: 409, title: "The session's worktree is not there" },
  worktree_removed: { status: 410, title: "The session's worktree was removed" },
  worktree_elsewhere: { status: 409, title: "The session's worktree is on another host" },
  run_finished: { status: 409, title: "Run already finished" },
  run_not_latest: { status: 409, title: "Run is not its session's latest" },
  retry_unsupported: { status: 400, title: "The session's agent cannot retry a run" },
  fork_unsupported: { status: 400, title: "The session's agent cannot fork a session" },
  run_not_finished: { status: 409, title: "Run has not finished" },
  no_fork_point: { status: 409, title: "No finished turn to fork after" },
  input_unsupported: { status: 409, title: "The run's agent takes no input while it runs" },
  control_unsupported: { status: 409, title: "The run's agent cannot switch while it runs" },
  run_not_running: { status: 409, title: "Run not running yet" },
  control_failed: { status: 409, title: "The agent refused the switch" },
  agent_no_answer: { status: 502, title: "The run's agent did not answer in time" },
  queue_full: { status: 429, title: "Too many runs" },
  idempotency_key_reused: {
    status: 422,
    title: "Idempotency key reused with a different request",
  },
  shutting_down: { status: 503, title: "Server shutting down" },
  agent_unavailable: { status: 503, title: "Agent not run by this server" },
  forge_unavailable: { status: 502, title: "The forge's API did not answer" },
  invalid_cursor: { status: 400, title: "Invalid cursor" },
  method_not_allowed: { status: 405, title: "Method not allowed" },
  not_ready: { status: 503, title: "Service not ready" },
  database_unavailable: { status: 503, title: "Database unavailable" },
  internal_error: { status: 500, title: "Internal server error" },
};

/** The codes, in the table's order: the Problem schema's enum. */
export const ERROR_CODES = Object.keys(ERROR_MAP) as [ErrorCode, ...ErrorCode[]];
