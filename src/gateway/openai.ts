import type { IncomingHttpHeaders } from "node:http";
import type { ModelApi, Route } from "./api.js";
import { responsesUsage } from "./responses-usage.js";
import type { Upstream } from "./upstream.js";
import { ResponseMeter } from "./usage-meter.js";

// OpenAI's Responses API as Codex calls it through the gateway. Its paths are those under an
// OpenAI base URL (which ends in `/v1`, as `https://api.openai.com/v1`): codex 0.171.0, given the
// gateway as its model provider, calls `POST /responses` (a stream) and nothing else; the model
// list is forwarded too, for any client of the run's. Nothing else of the API is forwarded.

const METERED: Route = { metered: true, open: false };
const FORWARDED: Route = { metered: false, open: false };

/**
 * The API's `error.type` and `error.code` of the answers the gateway gives itself. A refusal is
 * answered as the API refuses a spent quota (429 `insufficient_quota`) or a model the project may
 * not use (403 `model_not_found`): the two codex 0.171.0 gives up on at once. Any other 402 or 403
 * it takes for a passing fault and asks again, five times over some six seconds, heedless of
 * `x-should-retry`.
 */
const ERRORS: Record<number, { type: string; code: string | null }> = {
  400: { type: "invalid_request_error", code: null },
  401: { type: "invalid_request_error", code: "invalid_api_key" },
  403: { type: "invalid_request_error", code: "model_not_found" },
  404: { type: "invalid_request_error", code: "unknown_url" },
  413: { type: "invalid_request_error", code: "request_too_large" },
  429: { type: "insufficient_quota", code: "insufficient_quota" },
  502: { type: "server_error", code: null },
};

function route(method: string, path: string): Route | undefined {
  const [pathname = ""] = path.split("?");
  if (method === "POST" && pathname === "/responses") return METERED;
  if (method === "GET" && /^\/models(\/[^/]+)?$/.test(pathname)) return FORWARDED;
  return undefined;
}

/** A bearer `Authorization`, as codex sends its provider's key. */
function tokenOf(headers: IncomingHttpHeaders): string | undefined {
  return /^Bearer +(\S+)$/i.exec(headers.authorization ?? "")?.[1];
}

export function openaiApi(upstream: Upstream): ModelApi {
  return {
    prefix: "openai",
    upstream,
    route,
    tokenOf,
    requestIdHeader: "x-request-id",
    refusals: { budget: 429, model: 403 },
    errorBody: (status, message) => ({
      error: { message, ...(ERRORS[status] ?? ERRORS[502]), param: null },
    }),
    meter: (contentType) => new ResponseMeter(contentType, responsesUsage),
  };
}
