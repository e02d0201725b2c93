import { z } from "@hono/zod-openapi";
import type { Context, ErrorHandler, NotFoundHandler } from "hono";
import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { ZodError } from "zod";
import { AgentUnavailableError } from "../agents/registry.js";
import { BudgetExhaustedError, PolicyDeniedError } from "../auth/policy.js";
import { errorFields } from "../log.js";
import { SandboxError } from "../process/sandbox-start.js";
import {
  IdempotencyConflictError,
  KeyRunLimitError,
  PermissionAnswerMismatchError,
  PermissionRequestNotFoundError,
  PermissionRequestResolvedError,
  QueueFullError,
  RunFinishedError,
  RunNotLatestError,
  SessionBusyError,
  SessionExpiredError,
  SessionGoneError,
  ShuttingDownError,
  WorktreeHostGoneError,
} from "../runs/errors.js";
import { describeDbError, transientDbError } from "../store/errors.js";
import type { AppEnv } from "./context.js";

// Every error leaves the service as RFC 9457 problem+json with a stable `code` a client can
// switch on, and the request id to quote in a bug report.

export const ERROR_CODES = {
  validation_failed: "Request validation failed",
  malformed_json: "Malformed JSON body",
  unsupported_media_type: "Unsupported media type",
  payload_too_large: "Payload too large",
  not_found: "Not found",
  unauthorized: "Missing or invalid API key",
  forbidden: "Not allowed for this key",
  policy_denied: "Not allowed by the key's policy",
  budget_exhausted: "The key's monthly budget is spent",
  too_many_streams: "Too many open event streams for this key",
  rate_limited: "Too many requests for this key",
  key_not_found: "API key not found",
  sandbox_required: "Another tenant's key needs a sandbox",
  work_dir_not_allowed: "Work directory not allowed",
  session_not_found: "Session not found",
  run_not_found: "Run not found",
  permission_request_not_found: "Permission request not found",
  permission_request_resolved: "Permission request no longer pending",
  hook_not_found: "Hook not found",
  hook_exists: "Hook exists",
  invalid_signature: "Delivery signature does not verify",
  prompt_empty: "Hook prompt rendered empty",
  prompt_too_large: "Hook prompt rendered too large",
  session_busy: "Session has an active run",
  session_expired: "Session expired",
  worktree_unavailable: "Worktree mode unavailable",
  worktree_dirty: "Worktree has uncommitted changes",
  worktree_host_gone: "The session's worktree host has no live instance",
  run_finished: "Run already finished",
  run_not_latest: "Run is not its session's latest",
  retry_unsupported: "The session's agent cannot retry a run",
  queue_full: "Too many runs",
  idempotency_key_reused: "Idempotency key reused with a different request",
  shutting_down: "Server shutting down",
  agent_unavailable: "Agent not run by this server",
  invalid_cursor: "Invalid cursor",
  method_not_allowed: "Method not allowed",
  not_ready: "Service not ready",
  database_unavailable: "Database unavailable",
  internal_error: "Internal server error",
} as const;
export type ErrorCode = keyof typeof ERROR_CODES;

export const PROBLEM_CONTENT_TYPE = "application/problem+json";

export const ValidationIssue = z
  .object({
    location: z.enum(["body", "query", "path", "header"]),
    path: z.string().openapi({ example: "permission_mode" }),
    message: z.string(),
  })
  .openapi("ValidationIssue");
export type ValidationIssue = z.infer<typeof ValidationIssue>;

export const Problem = z
  .object({
    type: z.string().openapi({ example: "urn:agent-bridge:problem:session_not_found" }),
    title: z.string(),
    status: z.number().int(),
    detail: z.string(),
    code: z.enum(Object.keys(ERROR_CODES) as [ErrorCode, ...ErrorCode[]]),
    request_id: z.string(),
    errors: z.array(ValidationIssue).optional(),
    active_run_id: z
      .string()
      .optional()
      .openapi({ description: "With `session_busy`: the run in the way." }),
    events_url: z
      .string()
      .optional()
      .openapi({ description: "With `session_busy`: where to follow it." }),
  })
  .openapi("Problem");
export type Problem = z.infer<typeof Problem>;

export class ApiError extends Error {
  constructor(
    readonly status: ContentfulStatusCode,
    readonly code: ErrorCode,
    readonly detail: string,
    readonly extra: {
      errors?: ValidationIssue[];
      headers?: Record<string, string>;
      /** RFC 9457 extension members. */
      fields?: { active_run_id?: string; events_url?: string };
    } = {},
  ) {
    super(detail);
  }
}

export function problemResponse(c: Context<AppEnv>, err: ApiError): Response {
  const body: Problem = {
    type: `urn:agent-bridge:problem:${err.code}`,
    title: ERROR_CODES[err.code],
    status: err.status,
    detail: err.detail,
    code: err.code,
    request_id: c.get("requestId") ?? "",
    ...(err.extra.errors ? { errors: err.extra.errors } : {}),
    ...err.extra.fields,
  };
  return c.body(JSON.stringify(body), err.status, {
    "Content-Type": PROBLEM_CONTENT_TYPE,
    ...err.extra.headers,
  });
}

const LOCATIONS = { json: "body", query: "query", param: "path", header: "header" } as const;

/** Where a validator's target sits in the request. */
export const locationOf = (target: string): ValidationIssue["location"] =>
  LOCATIONS[target as keyof typeof LOCATIONS] ?? "body";

/** A 400 that lists every issue, in `errors` and in the detail. */
export function invalidRequest(errors: ValidationIssue[]): ApiError {
  const detail = errors
    .map((e) => (e.path ? `${e.location} ${e.path}: ${e.message}` : `${e.location}: ${e.message}`))
    .join("; ");
  return new ApiError(400, "validation_failed", detail, { errors });
}

/** Turns a failed zod validation of one request part into a 400 that lists every issue. */
export function validationError(target: string, error: ZodError): ApiError {
  const location = locationOf(target);
  return invalidRequest(
    error.issues.map((issue) => ({ location, path: issue.path.join("."), message: issue.message })),
  );
}

export const onError: ErrorHandler<AppEnv> = (err, c) => {
  if (err instanceof ApiError) return problemResponse(c, err);
  const refusal = runRefusal(err);
  if (refusal) return problemResponse(c, refusal);
  if (transientDbError(err)) {
    // An outage, not a bug: nothing was done, and the same request may work in a moment.
    c.get("logger")?.warn("request failed: the database is unavailable", {
      request_id: c.get("requestId"),
      error: describeDbError(err),
    });
    return problemResponse(
      c,
      new ApiError(503, "database_unavailable", `${describeDbError(err)}; retry shortly`, {
        headers: { "Retry-After": "5" },
      }),
    );
  }
  if (err instanceof HTTPException) {
    // Hono's own exceptions: the JSON validator's parse failure is the one a client can cause.
    const code: ErrorCode =
      err.status === 400 && /json/i.test(err.message) ? "malformed_json" : statusCode(err.status);
    return problemResponse(c, new ApiError(err.status, code, err.message || ERROR_CODES[code]));
  }
  c.get("logger")?.error("unhandled error", {
    request_id: c.get("requestId"),
    ...errorFields(err),
  });
  return problemResponse(
    c,
    new ApiError(
      500,
      "internal_error",
      "The server failed to handle the request; see its log for the request id.",
    ),
  );
};

/** The run manager's refusals (its gate's included), as the HTTP answers they are. */
function runRefusal(err: unknown): ApiError | undefined {
  if (err instanceof PolicyDeniedError) return new ApiError(403, "policy_denied", err.message);
  if (err instanceof SandboxError) return new ApiError(409, "sandbox_required", err.message);
  if (err instanceof BudgetExhaustedError) {
    return new ApiError(402, "budget_exhausted", err.message);
  }
  if (err instanceof SessionBusyError) {
    return new ApiError(409, "session_busy", err.message, {
      fields: { active_run_id: err.activeRunId, events_url: `/v1/runs/${err.activeRunId}/events` },
    });
  }
  if (err instanceof QueueFullError) {
    return new ApiError(429, "queue_full", `${err.message}; retry later`, {
      headers: { "Retry-After": String(err.retryAfterSeconds) },
    });
  }
  if (err instanceof KeyRunLimitError) {
    return new ApiError(429, "rate_limited", `${err.message}; retry later`, {
      headers: { "Retry-After": String(err.retryAfterSeconds) },
    });
  }
  if (err instanceof IdempotencyConflictError)
    return new ApiError(422, "idempotency_key_reused", err.message);
  if (err instanceof PermissionRequestNotFoundError)
    return new ApiError(404, "permission_request_not_found", err.message);
  if (err instanceof PermissionAnswerMismatchError)
    return invalidRequest([{ location: "body", path: err.field, message: err.message }]);
  if (err instanceof PermissionRequestResolvedError)
    return new ApiError(409, "permission_request_resolved", err.message);
  if (err instanceof RunFinishedError) return new ApiError(409, "run_finished", err.message);
  if (err instanceof RunNotLatestError) return new ApiError(409, "run_not_latest", err.message);
  if (err instanceof WorktreeHostGoneError) {
    return new ApiError(409, "worktree_host_gone", err.message);
  }
  if (err instanceof SessionExpiredError) return new ApiError(410, "session_expired", err.message);
  if (err instanceof SessionGoneError) return new ApiError(404, "session_not_found", err.message);
  if (err instanceof ShuttingDownError) return new ApiError(503, "shutting_down", err.message);
  if (err instanceof AgentUnavailableError) {
    return new ApiError(503, "agent_unavailable", err.message);
  }
  return undefined;
}

function statusCode(status: number): ErrorCode {
  if (status === 404) return "not_found";
  if (status === 405) return "method_not_allowed";
  if (status === 413) return "payload_too_large";
  if (status === 415) return "unsupported_media_type";
  if (status === 400) return "validation_failed";
  return "internal_error";
}

export const onNotFound: NotFoundHandler<AppEnv> = (c) =>
  problemResponse(c, new ApiError(404, "not_found", `No route for ${c.req.method} ${c.req.path}`));

/** The problem+json responses a route documents, keyed by status. */
export function problemResponses<S extends number>(...statuses: S[]) {
  const descriptions: Record<number, string> = {
    400: "Invalid request: every problem is listed in `errors` (or, for a retry, `retry_unsupported`: the session's agent cannot resume at an earlier message)",
    401: "Missing, malformed, unknown or revoked API key",
    402: "The key's monthly budget (`max_budget_usd`) is spent: nothing was started",
    403: "The key lacks the admin role, or its policy does not allow what was asked (`policy_denied`)",
    404: "Not found",
    409: "Conflict",
    410: "The session has expired",
    422: "Unprocessable: an Idempotency-Key reused with a different body, or a hook's prompt that rendered empty or too large",
    413: "Body larger than the configured limit",
    415: "Body is not JSON",
    429: "Too many requests",
    503: "Not ready",
  };
  return Object.fromEntries(
    statuses.map((s) => [
      s,
      {
        description: descriptions[s] ?? "Error",
        content: { [PROBLEM_CONTENT_TYPE]: { schema: Problem } },
      },
    ]),
  ) as Record<
    S,
    { description: string; content: { [PROBLEM_CONTENT_TYPE]: { schema: typeof Problem } } }
  >;
}
