import type { MiddlewareHandler } from "hono";
import { DomainError } from "../errors.js";
import { errorText, type Logger } from "../log.js";
import type { Database } from "../store/db.js";
import { takeToken } from "../store/rate-limits.js";
import type { AppEnv } from "./context.js";

/**
 * A token bucket per key: `perMinute` requests a minute on average, bursts up to that many. The
 * buckets are in the database, shared by every instance on it (src/store/rate-limits.ts). While
 * the database cannot be reached the request goes through uncounted, rather than failing on the
 * count alone.
 */
export function rateLimit(
  db: Database,
  perMinute: number,
  logger: Logger,
): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const waitSeconds = await takeToken(db, c.var.principal.keyId ?? "anonymous", perMinute).catch(
      (err: unknown) => {
        logger.warn("could not count a request against its key's rate limit", {
          error: errorText(err),
        });
        return 0;
      },
    );
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
