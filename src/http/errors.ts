import { z } from "@hono/zod-openapi";
import type { Context, ErrorHandler, NotFoundHandler } from "hono";
import { HTTPException } from "hono/http-exception";
import type { ZodError } from "zod";
import {
  DomainError,
  type ErrorCode,
  InvalidRequestError,
  type ValidationIssue as Issue,
} from "../errors.js";
import { errorFields } from "../log.js";
import { describeDbError, transientDbError } from "../store/errors.js";
import type { AppEnv } from "./context.js";
import { ERROR_CODES, ERROR_MAP } from "./error-map.js";

// Every error leaves the service as RFC 9457 problem+json with a stable `code` a client can
// switch on, and the request id to quote in a bug report.

export const PROBLEM_CONTENT_TYPE = "application/problem+json";

const ValidationIssue = z
  .object({
    location: z.enum(["body", "query", "path", "header"]),
    path: z.string().openapi({ example: "permission_mode" }),
    message: z.string(),
  })
  .openapi("ValidationIssue") satisfies z.ZodType<Issue>;

export const Problem = z
  .object({
    type: z.string().openapi({ example: "urn:agent-bridge:problem:session_not_found" }),
    title: z.string(),
    status: z.number().int(),
    detail: z.string(),
    code: z.enum(ERROR_CODES),
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

/** The error as problem+json, with the status, title and headers its code has (error-map.ts). */
export function problemResponse(
  c: Context<AppEnv>,
  err: DomainError,
  headers: Record<string, string> = {},
): Response {
  const { status, title, headers: codeHeaders } = ERROR_MAP[err.code];
  const { errors, activeRunId, retryAfterSeconds } = err.extra;
  const body: Problem = {
    type: `urn:agent-bridge:problem:${err.code}`,
    title,
    status,
    detail: err.detail,
    code: err.code,
    request_id: c.get("requestId") ?? "",
    ...(errors ? { errors } : {}),
    ...(activeRunId
      ? { active_run_id: activeRunId, events_url: `/v1/runs/${activeRunId}/events` }
      : {}),
  };
  return c.body(JSON.stringify(body), status, {
    "Content-Type": PROBLEM_CONTENT_TYPE,
    ...codeHeaders,
    ...(retryAfterSeconds === undefined ? {} : { "Retry-After": String(retryAfterSeconds) }),
    ...headers,
  });
}

const LOCATIONS = { json: "body", query: "query", param: "path", header: "header" } as const;

/** Where a validator's target sits in the request. */
export const locationOf = (target: string): Issue["location"] =>
  LOCATIONS[target as keyof typeof LOCATIONS] ?? "body";

/** Turns a failed zod validation of one request part into a 400 that lists every issue. */
export function validationError(target: string, error: ZodError): InvalidRequestError {
  const location = locationOf(target);
  return new InvalidRequestError(
    error.issues.map((issue) => ({ location, path: issue.path.join("."), message: issue.message })),
  );
}

export const onError: ErrorHandler<AppEnv> = (err, c) => problemResponse(c, domainErrorOf(err, c));

/** What any error thrown while handling a request is for the client. */
function domainErrorOf(err: unknown, c: Context<AppEnv>): DomainError {
  if (err instanceof DomainError) return err;
  if (transientDbError(err)) {
    // An outage, not a bug: nothing was done, and the same request may work in a moment.
    c.get("logger")?.warn("request failed: the database is unavailable", {
      request_id: c.get("requestId"),
      error: describeDbError(err),
    });
    return new DomainError("database_unavailable", `${describeDbError(err)}; retry shortly`, {
      retryAfterSeconds: 5,
    });
  }
  if (err instanceof HTTPException) {
    // Hono's own exceptions: the JSON validator's parse failure is the one a client can cause.
    const code: ErrorCode =
      err.status === 400 && /json/i.test(err.message) ? "malformed_json" : statusCode(err.status);
    return new DomainError(code, err.message || ERROR_MAP[code].title);
  }
  c.get("logger")?.error("unhandled error", {
    request_id: c.get("requestId"),
    ...errorFields(err),
  });
  return new DomainError(
    "internal_error",
    "The server failed to handle the request; see its log for the request id.",
  );
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
  problemResponse(c, new DomainError("not_found", `No route for ${c.req.method} ${c.req.path}`));

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
