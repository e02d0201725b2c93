import type { MiddlewareHandler } from "hono";
import type { AppEnv } from "./context.js";
import { ApiError } from "./errors.js";

/**
 * A token bucket per key: `perMinute` requests a minute on average, bursts up to that many.
 * In memory, which is right for one server process; it starts full after a restart.
 */
export function rateLimit(perMinute: number): MiddlewareHandler<AppEnv> {
  const buckets = new Map<string, { tokens: number; at: number }>();
  const perMs = perMinute / 60_000;
  return async (c, next) => {
    const id = c.var.principal.keyId ?? "anonymous";
    const now = Date.now();
    const bucket = buckets.get(id) ?? { tokens: perMinute, at: now };
    bucket.tokens = Math.min(perMinute, bucket.tokens + (now - bucket.at) * perMs);
    bucket.at = now;
    buckets.set(id, bucket);
    if (bucket.tokens < 1) {
      const waitSeconds = Math.ceil((1 - bucket.tokens) / perMs / 1000);
      throw new ApiError(
        429,
        "rate_limited",
        `more than ${perMinute} requests a minute for this key`,
        {
          headers: { "Retry-After": String(waitSeconds) },
        },
      );
    }
    bucket.tokens -= 1;
    return next();
  };
}
