import { createHmac, timingSafeEqual } from "node:crypto";
import type { Database } from "../store/db.js";
import { sharedSecret } from "../store/secrets.js";

// A stream token lets a browser's EventSource, which cannot send `Authorization`, follow one run:
// `GET /v1/runs/{id}/events?token=…`, for that run only and for a few minutes. It is
// `<expiry>.<key id or ->.<signature>`, the signature an HMAC-SHA256 over the run id, the key
// and the expiry with a secret kept in the database, so any instance can check a token another
// made, and nothing needs storing per token. The key it was made with must still be good when
// the token is used: revoking the key ends its tokens too.

export const STREAM_TOKEN_TTL_SECONDS = 300;

const SECRET_NAME = "stream_tokens";

/** The signing secret, read once per database. */
const secrets = new WeakMap<Database, Promise<Buffer>>();

function secretOf(db: Database): Promise<Buffer> {
  let secret = secrets.get(db);
  if (!secret) {
    secret = sharedSecret(db, SECRET_NAME);
    // A failed read is tried again by the next request, not remembered.
    secret.catch(() => secrets.delete(db));
    secrets.set(db, secret);
  }
  return secret;
}

const sign = (secret: Buffer, runId: string, keyId: string, expires: number) =>
  createHmac("sha256", secret).update(`run-events\n${runId}\n${keyId}\n${expires}`).digest();

export async function issueStreamToken(
  db: Database,
  runId: string,
  keyId: string | null,
  now = Date.now(),
): Promise<{ token: string; expiresAt: Date }> {
  const expires = Math.floor(now / 1000) + STREAM_TOKEN_TTL_SECONDS;
  const key = keyId ?? "-";
  const signature = sign(await secretOf(db), runId, key, expires).toString("base64url");
  return { token: `${expires}.${key}.${signature}`, expiresAt: new Date(expires * 1000) };
}

export class InvalidStreamTokenError extends Error {}

/**
 * The key id (null: made with auth off) the token was made with, when it is a good token for
 * the events of `runId` at `now`; throws InvalidStreamTokenError saying why not.
 */
export async function verifyStreamToken(
  db: Database,
  runId: string,
  token: string,
  now = Date.now(),
): Promise<string | null> {
  // Only the one spelling issueStreamToken writes: no leading zero in the expiry.
  const match = /^(0|[1-9]\d{0,11})\.([0-9a-f-]{1,36})\.([A-Za-z0-9_-]{43})$/.exec(token);
  if (!match) throw new InvalidStreamTokenError("malformed stream token");
  const [, expiresText = "", key = "", signature = ""] = match;
  const expires = Number(expiresText);
  // Compared as text, not as the bytes it decodes to: the last of 43 base64url characters carries
  // 4 bits and 2 that decoding ignores, so four spellings decode to the same signature.
  const expected = Buffer.from(sign(await secretOf(db), runId, key, expires).toString("base64url"));
  if (!timingSafeEqual(Buffer.from(signature), expected)) {
    throw new InvalidStreamTokenError("this stream token is not for this run");
  }
  if (expires * 1000 <= now) throw new InvalidStreamTokenError("stream token expired");
  return key === "-" ? null : key;
}
