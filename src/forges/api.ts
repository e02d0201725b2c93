import type { IncomingHttpHeaders } from "node:http";
import { failureCode, outboundRequest } from "../net/http-request.js";
import { BlockedAddressError, type CallbackTargets } from "../net/targets.js";
import type { Forge } from "./delivery.js";

// One call to a forge's REST API with a hook's token, and what its answer means for a caller that
// retries: success, a refusal that no retry changes (401, 403, 404, 422), or a failure worth
// another attempt, at the time the forge asks for when it says (Retry-After, GitHub's secondary
// rate limit and `x-ratelimit-reset`, GitLab's `RateLimit-Reset`).

export const DEFAULT_API_URLS: Record<Forge, string> = {
  github: "https://api.github.com",
  gitlab: "https://gitlab.com/api/v4",
};

export interface ForgeAccess {
  forge: Forge;
  /** Without a trailing slash: `https://api.github.com`, `https://gitlab.example.com/api/v4`. */
  apiUrl: string;
  token: string;
}

export interface ForgeCall {
  method: "GET" | "POST" | "PATCH" | "PUT";
  /** Below the API's URL: `/repos/o/r/issues/1/comments`. */
  path: string;
  body?: unknown;
}

export interface CallOptions {
  targets: CallbackTargets;
  timeoutMs: number;
  stopping: AbortSignal;
  /** Read when the answer comes: a Retry-After counts from then, however long the call took. */
  clock: () => number;
}

export type ForgeAnswer =
  | { ok: true; status: number; json: unknown }
  | {
      ok: false;
      status: number | null;
      /** Short, shown on the run: `http_404`, `timeout`, `rate_limited`… */
      error: string;
      /** No retry changes the answer (a wrong token, a missing repository, a refused body). */
      final: boolean;
      /** When the forge said to come back, if it did. */
      retryAt: number | null;
      /** The socket's own text, for the server's log. */
      cause?: string;
    };

/** How much of an answer is read: a comment or a check run is a few KiB. */
const MAX_ANSWER_BYTES = 1024 * 1024;

function headersOf(access: ForgeAccess): Record<string, string> {
  const common = { "User-Agent": "agent-bridge", "Content-Type": "application/json" };
  if (access.forge === "github") {
    return {
      ...common,
      Accept: "application/vnd.github+json",
      Authorization: `Bearer ${access.token}`,
      "X-GitHub-Api-Version": "2022-11-28",
    };
  }
  return { ...common, Accept: "application/json", "PRIVATE-TOKEN": access.token };
}

export async function callForge(
  access: ForgeAccess,
  call: ForgeCall,
  opts: CallOptions,
): Promise<ForgeAnswer> {
  const timeout = AbortSignal.timeout(opts.timeoutMs);
  const target = new URL(`${access.apiUrl.replace(/\/+$/, "")}${call.path}`);
  try {
    const answer = await outboundRequest(target, {
      method: call.method,
      headers: headersOf(access),
      body: call.body === undefined ? undefined : JSON.stringify(call.body),
      targets: opts.targets,
      signal: AbortSignal.any([timeout, opts.stopping]),
      maxBodyBytes: MAX_ANSWER_BYTES,
    });
    const { status, headers } = answer;
    if (status >= 200 && status < 300) return { ok: true, status, json: parse(answer.body) };
    const retryAt = retryTime(headers, opts.clock());
    const limited =
      status === 429 || (status === 403 && (retryAt !== null || /rate limit/i.test(answer.body)));
    return {
      ok: false,
      status,
      error: limited ? "rate_limited" : `http_${status}`,
      final: !limited && status >= 400 && status < 500 && status !== 408,
      retryAt,
    };
  } catch (err) {
    return {
      ok: false,
      status: null,
      error: failureCode(err, { timedOut: timeout.aborted, stopped: opts.stopping.aborted }),
      final: false,
      retryAt: null,
      ...(err instanceof BlockedAddressError ? {} : { cause: String(err) }),
    };
  }
}

function parse(body: string): unknown {
  try {
    return JSON.parse(body);
  } catch {
    return null;
  }
}

const header = (headers: IncomingHttpHeaders, name: string) => {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
};

/**
 * When the forge asks to be called again: `Retry-After` (seconds or an HTTP date), else, with no
 * requests left, the reset time of GitHub (`x-ratelimit-reset`, epoch seconds) or GitLab
 * (`ratelimit-reset`, epoch seconds).
 */
export function retryTime(headers: IncomingHttpHeaders, now: number): number | null {
  const after = header(headers, "retry-after");
  if (after !== undefined) {
    if (/^\d{1,7}$/.test(after.trim())) return now + Number(after) * 1000;
    const date = Date.parse(after);
    if (Number.isFinite(date)) return Math.max(now, date);
  }
  const remaining =
    header(headers, "x-ratelimit-remaining") ?? header(headers, "ratelimit-remaining");
  const reset = header(headers, "x-ratelimit-reset") ?? header(headers, "ratelimit-reset");
  if (remaining?.trim() === "0" && reset && /^\d{1,12}$/.test(reset.trim())) {
    return Math.max(now, Number(reset) * 1000);
  }
  return null;
}
