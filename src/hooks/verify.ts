import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";

// Verifying an incoming delivery against the raw bytes of its body, by the hook's kind. Every
// comparison takes the same time whatever the bytes, and a request for a hook that does not
// exist is put through the same work against a throw-away secret.
// Written here rather than taken from `standardwebhooks` or `@octokit/webhooks-methods`: the first
// reads the timestamp with parseInt against its own whole-second clock and hashes in plain JS (ten
// times slower, work the decoy would have to match); the second verifies the body as text, so
// bytes never signed pass when they read as signed text (test/hooks/verify.unit.test.ts).

export const VERIFICATION_KINDS = ["github", "gitlab", "standard", "bearer"] as const;
export type VerificationKind = (typeof VERIFICATION_KINDS)[number];

/** Standard Webhooks: a delivery's timestamp may differ from our clock by this much. */
export const TIMESTAMP_TOLERANCE_SECONDS = 5 * 60;

export type Headers = (name: string) => string | undefined;

export type Verdict =
  | { ok: true; deliveryId: string | undefined; event: string | undefined }
  | { ok: false; reason: string };

const refuse = (reason: string): Verdict => ({ ok: false, reason });

/** Equal-length digests compared in constant time; unequal lengths are hashed first. */
export function sameBytes(a: Buffer, b: Buffer): boolean {
  if (a.length !== b.length) {
    const ha = createHash("sha256").update(a).digest();
    const hb = createHash("sha256").update(b).digest();
    timingSafeEqual(ha, hb);
    return false;
  }
  return timingSafeEqual(a, b);
}

/** The HMAC key of a `whsec_…` secret: the base64 after the prefix. */
export function standardKey(secret: string): Buffer {
  return Buffer.from(secret.replace(/^whsec_/, ""), "base64");
}

/** Whether a secret is a Standard Webhooks secret: `whsec_` and base64 of 16 to 64 bytes. */
export function isStandardSecret(secret: string): boolean {
  const match = /^whsec_([A-Za-z0-9+/]+={0,2})$/.exec(secret);
  if (!match?.[1]) return false;
  const key = Buffer.from(match[1], "base64");
  return key.length >= 16 && key.length <= 64;
}

/** `v1,<base64>` of HMAC-SHA256 over `id.timestamp.body` (the Standard Webhooks signature). */
export function signStandard(secret: string, id: string, timestamp: number, body: Buffer | string) {
  const mac = createHmac("sha256", standardKey(secret))
    .update(`${id}.${timestamp}.`)
    .update(body)
    .digest("base64");
  return `v1,${mac}`;
}

function verifyGithub(secret: string, body: Buffer, header: Headers): Verdict {
  const given = header("x-hub-signature-256");
  if (!given) return refuse("missing X-Hub-Signature-256");
  const expected = createHmac("sha256", secret).update(body).digest();
  const match = /^sha256=([0-9a-f]{64})$/i.exec(given.trim());
  const ok = sameBytes(Buffer.from(match?.[1] ?? "", "hex"), expected);
  if (!ok) return refuse("X-Hub-Signature-256 does not match the body");
  return { ok, deliveryId: header("x-github-delivery"), event: header("x-github-event") };
}

function verifyStandard(secret: string, body: Buffer, header: Headers, now: number): Verdict {
  const id = header("webhook-id");
  const timestamp = header("webhook-timestamp");
  const signatures = header("webhook-signature");
  if (!id || !timestamp || !signatures) {
    return refuse("missing webhook-id, webhook-timestamp or webhook-signature");
  }
  const seconds = /^\d{1,12}$/.test(timestamp) ? Number(timestamp) : Number.NaN;
  if (!Number.isFinite(seconds) || Math.abs(now / 1000 - seconds) > TIMESTAMP_TOLERANCE_SECONDS) {
    return refuse(`webhook-timestamp is more than ${TIMESTAMP_TOLERANCE_SECONDS} s from now`);
  }
  const expected = Buffer.from(signStandard(secret, id, seconds, body).slice(3), "base64");
  let ok = false;
  // Several space-separated signatures may be given (a sender rotating its secret); one must match.
  for (const entry of signatures.trim().split(/\s+/)) {
    const [version, mac] = entry.split(",", 2);
    if (version !== "v1" || !mac) continue;
    if (sameBytes(Buffer.from(mac, "base64"), expected)) ok = true;
  }
  if (!ok) return refuse("webhook-signature does not match the body");
  return { ok, deliveryId: id, event: undefined };
}

const digest = (s: string) => createHash("sha256").update(s).digest();

function verifyBearer(secret: string, header: Headers): Verdict {
  const given = /^Bearer\s+(\S+)\s*$/i.exec(header("authorization") ?? "")?.[1];
  if (!given) return refuse("missing Authorization: Bearer <hook secret>");
  if (!sameBytes(digest(given), digest(secret))) return refuse("wrong bearer secret");
  return { ok: true, deliveryId: header("x-delivery-id"), event: header("x-event") };
}

/**
 * GitLab sends the hook's secret token as it is, in `X-Gitlab-Token`; a delivery's id is its
 * `X-Gitlab-Event-UUID` (or, from GitLab 17.4, `Idempotency-Key`, the same on its retries). Its
 * event is the payload's `object_kind`, read by the caller.
 */
function verifyGitlab(secret: string, header: Headers): Verdict {
  const given = header("x-gitlab-token");
  if (!given) return refuse("missing X-Gitlab-Token");
  if (!sameBytes(digest(given), digest(secret))) return refuse("X-Gitlab-Token does not match");
  return {
    ok: true,
    deliveryId: header("idempotency-key") ?? header("x-gitlab-event-uuid"),
    event: undefined,
  };
}

export function verifyDelivery(
  kind: VerificationKind,
  secret: string,
  body: Buffer,
  header: Headers,
  now = Date.now(),
): Verdict {
  if (kind === "github") return verifyGithub(secret, body, header);
  if (kind === "standard") return verifyStandard(secret, body, header, now);
  if (kind === "gitlab") return verifyGitlab(secret, header);
  return verifyBearer(secret, header);
}

const decoy = `whsec_${randomBytes(32).toString("base64")}`;

/**
 * The same work as verifying, for a hook that does not exist, so that the time taken does not
 * tell a caller whether a name is in use.
 */
export function verifyAgainstDecoy(body: Buffer, header: Headers): void {
  createHmac("sha256", standardKey(decoy)).update(body).digest();
  verifyBearer(decoy, header);
}
