import type { Context, MiddlewareHandler } from "hono";
import { hashKey, isWellFormedKey, sameHash } from "../auth/keys.js";
import { InvalidStreamTokenError, verifyStreamToken } from "../auth/stream-tokens.js";
import { DomainError } from "../errors.js";
import { errorText } from "../log.js";
import { ANONYMOUS_ADMIN, type Principal } from "../principal.js";
import { findKeyByHash, getKey, touchKey } from "../store/keys.js";
import { keyTakingToken } from "../store/rate-limits.js";
import type { ApiKeyRow } from "../store/schema.js";
import type { AppEnv } from "./context.js";

const unauthorized = (detail: string) => new DomainError("unauthorized", detail);

/** `last_used_at` is kept to the minute: a request need not cost a write each. */
const TOUCH_EVERY_MS = 60_000;
const lastTouched = new Map<string, number>();

/**
 * Every /v1 request names its key in `Authorization: Bearer <key>`. The key is looked up by its
 * hash, so the secret is never compared byte by byte against stored values.
 */
export const authenticate = keyAuthentication(async (c, hash) => findKeyByHash(c.var.db, hash));

/**
 * `authenticate`, with the request counted against its key's rate limit (`perMinute`, see
 * rate-limit.ts) by the statement that reads the key: one round trip before the request's own
 * work, not two.
 */
export const authenticateCounted = (perMinute: number) =>
  keyAuthentication(async (c, hash) => {
    const found = await keyTakingToken(c.var.db, hash, perMinute).catch((err: unknown) => {
      // As when the rate limit takes its token itself: a count that fails does not fail the
      // request (a database that reads but cannot write, say). The key is read alone, and the
      // rate limit tries its own count.
      c.var.logger.warn("could not count a request against its key's rate limit", {
        error: errorText(err),
      });
      return null;
    });
    if (found === null) return findKeyByHash(c.var.db, hash);
    if (found) c.set("requestCounted", found.taken);
    return found?.key;
  });

function keyAuthentication(
  read: (c: Context<AppEnv>, hash: string) => Promise<ApiKeyRow | undefined>,
): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    if (c.var.config.auth.mode === "none") {
      c.set("principal", ANONYMOUS_ADMIN);
      return next();
    }
    const header = c.req.header("authorization");
    if (!header) {
      const streamer = await streamTokenPrincipal(c);
      if (!streamer) throw unauthorized("missing Authorization: Bearer <API key>");
      c.set("principal", streamer);
      return next();
    }
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    const key = match?.[1];
    if (!key || !isWellFormedKey(key))
      throw unauthorized("malformed API key: expected Bearer ab_…");
    const hash = hashKey(key);
    const row = await read(c, hash);
    if (!row || !sameHash(row.hash, hash) || row.revokedAt) {
      throw unauthorized("unknown or revoked API key");
    }
    c.set("principal", { keyId: row.id, name: row.name, admin: row.admin });
    const now = Date.now();
    if (now - (lastTouched.get(row.id) ?? 0) >= TOUCH_EVERY_MS) {
      lastTouched.set(row.id, now);
      void touchKey(c.var.db, row.id).catch(() => {});
    }
    return next();
  };
}

/** The one route a stream token opens (see auth/stream-tokens.ts). */
const RUN_EVENTS = /^\/v1\/runs\/([^/]+)\/events\/?$/;

/**
 * Who made the `?token=` of a request without `Authorization` (undefined when there is none):
 * only on GET of the events of the run the token was made for, while the key that made it holds.
 */
async function streamTokenPrincipal(c: Context<AppEnv>): Promise<Principal | undefined> {
  const token = c.req.query("token");
  if (token === undefined) return undefined;
  const runId = c.req.method === "GET" ? RUN_EVENTS.exec(c.req.path)?.[1] : undefined;
  if (!runId) {
    throw unauthorized(
      "a stream token is good only for GET /v1/runs/{id}/events; elsewhere send Authorization: Bearer <API key>",
    );
  }
  let keyId: string | null;
  try {
    keyId = await verifyStreamToken(c.var.db, runId, token);
  } catch (err) {
    if (err instanceof InvalidStreamTokenError) throw unauthorized(err.message);
    throw err;
  }
  const row = keyId === null ? undefined : await getKey(c.var.db, keyId);
  if (!row || row.revokedAt)
    throw unauthorized("the key this stream token was made with is revoked");
  return { keyId: row.id, name: row.name, admin: row.admin };
}

/** Admin-only routes: a valid key without the admin role gets 403. */
export const requireAdmin: MiddlewareHandler<AppEnv> = async (c, next) => {
  if (!c.var.principal.admin)
    throw new DomainError("forbidden", "this route needs an admin API key");
  return next();
};
