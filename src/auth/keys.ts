import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import type { Database } from "../store/db.js";
import { insertKey, type KeyPolicyColumns } from "../store/keys.js";

// API keys: 256 random bits behind a recognisable prefix. Only a SHA-256 of a key is stored;
// with that much entropy a fast hash is enough (nothing to brute-force), and it lets a request's
// key be found by an index lookup.

export const KEY_PREFIX = "ab_";
const KEY_PATTERN = /^ab_[A-Za-z0-9_-]{43}$/;

export function generateKey(): string {
  return `${KEY_PREFIX}${randomBytes(32).toString("base64url")}`;
}

export function isWellFormedKey(key: string): boolean {
  return KEY_PATTERN.test(key);
}

export function hashKey(key: string): string {
  return createHash("sha256").update(key).digest("hex");
}

/** What listings show of a key: enough to tell keys apart, never enough to use one. */
export function displayPrefix(key: string): string {
  return key.slice(0, KEY_PREFIX.length + 6);
}

/** Compares two hex hashes in constant time. */
export function sameHash(a: string, b: string): boolean {
  const x = Buffer.from(a, "hex");
  const y = Buffer.from(b, "hex");
  return x.length === y.length && timingSafeEqual(x, y);
}

/** Makes a key and stores its hash; the key itself is returned this once and never again. */
export async function issueKey(
  db: Database,
  input: { name: string; admin: boolean } & KeyPolicyColumns,
) {
  const key = generateKey();
  const row = await insertKey(db, { ...input, hash: hashKey(key), prefix: displayPrefix(key) });
  return { key, row };
}
