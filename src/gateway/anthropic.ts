import type { IncomingHttpHeaders } from "node:http";
import type { ModelApi, Route } from "./api.js";
import { messagesUsage } from "./messages-usage.js";
import type { Upstream } from "./upstream.js";
import { ResponseMeter } from "./usage-meter.js";

// Anthropic's API as Claude Code calls it through the gateway. The CLI (2.1.328) calls
// `POST /v1/messages` (streaming, and not for a few side requests), may count tokens and list
// models, and checks that its API answers with a `HEAD /api/hello` that carries no credential.
// Nothing else of the API is forwarded: the operator's credential opens only what a run needs.

const METERED: Route = { metered: true, open: false };
const FORWARDED: Route = { metered: false, open: false };
const CONNECTIVITY_CHECK: Route = { metered: false, open: true };

const ERROR_TYPES: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  402: "billing_error",
  403: "permission_error",
  404: "not_found_error",
  413: "request_too_large",
  502: "api_error",
};

function route(method: string, path: string): Route | undefined {
  const [pathname = ""] = path.split("?");
  if (method === "POST" && pathname === "/v1/messages") return METERED;
  if (method === "POST" && pathname === "/v1/messages/count_tokens") return FORWARDED;
  if (method === "GET" && /^\/v1\/models(\/[^/]+)?$/.test(pathname)) return FORWARDED;
  if ((method === "HEAD" || method === "GET") && pathname === "/api/hello") {
    return CONNECTIVITY_CHECK;
  }
  return undefined;
}

/** `x-api-key`, or a bearer `Authorization`: the CLI sends the one its variable calls for. */
function tokenOf(headers: IncomingHttpHeaders): string | undefined {
  const key = headers["x-api-key"];
  if (typeof key === "string" && key !== "") return key;
  const bearer = /^Bearer +(\S+)$/i.exec(headers.authorization ?? "");
  return bearer?.[1];
}

export function anthropicApi(upstream: Upstream): ModelApi {
  return {
    prefix: "anthropic",
    upstream,
    route,
    tokenOf,
    requestIdHeader: "request-id",
    // Claude Code reports a 402 `billing_error` at once (a 400 it retries six times, a 403 it
    // takes for a bad credential).
    refusals: { budget: 402, model: 403 },
    errorBody: (status, message) => ({
      type: "error",
      error: { type: ERROR_TYPES[status] ?? "api_error", message },
    }),
    meter: (contentType) => new ResponseMeter(contentType, messagesUsage),
  };
}
