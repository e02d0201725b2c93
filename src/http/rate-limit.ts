import type { MiddlewareHandler } from "hono";
import { DomainError } from "../errors.js";
import { errorText, type Logger } from "../log.js";
import type { Database } from "../store/db.js";
import { takeToken, tokenWait } from "../store/rate-limits.js";
import type { AppEnv } from "./context.js";

/**
 * A token bucket per key: `perMinute` requests a minute on average, bursts up to that many. The
 * buckets are in the database, shared by every instance on it (src/store/rate-limits.ts). A
 * request with a key was counted as its key was read (`authenticateCounted`); a request without
 * one (a stream token's, or with keys off) takes its token here. While the database cannot be
 * reached the request goes through uncounted, rather than failing on the count alone.
 */
export function rateLimit(
  db: Database,
  perMinute: number,
  logger: Logger,
): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const counted = c.var.requestCounted;
    // Counted as its key was read, with a token to take: nothing to wait for.
    if (counted) return next();
    const bucket = c.var.principal.keyId ?? "anonymous";
    const waitSeconds = await (counted === false
      ? tokenWait(db, bucket, perMinute)
      : takeToken(db, bucket, perMinute)
    ).catch((err: unknown) => {
      logger.warn("could not count a request against its key's rate limit", {
        error: errorText(err),
      });
      return 0;
    });
    if (waitSeconds > 0) {
      throw new DomainError(
        "rate_limited",
        `more than ${perMinute} requests a minute for this key`,
        {
          retryAfterSeconds: waitSeconds,
        },
      );
    }
    return next();
  };
}
