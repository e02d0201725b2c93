import { createHash } from "node:crypto";
import type { Database } from "../store/db.js";
import { expireIdempotencyKey, findRunByIdempotencyKey } from "../store/run-admission.js";
import { IdempotencyConflictError } from "./errors.js";
import { type Message, NO_RUN_OPTIONS } from "./message.js";

// An Idempotency-Key names one run of its session for a day: the same request again gets that
// run back, another request with the key is a conflict, and after the day the key is free again.

const IDEMPOTENCY_WINDOW_MS = 24 * 60 * 60 * 1000;

/** What an Idempotency-Key stands for: a second use with another hash is a conflict. */
export function messageHash(message: Message): string {
  const hash = createHash("sha256").update(
    JSON.stringify([
      message.text,
      message.systemPrompt,
      ...(message.retryOf ? [message.retryOf] : []),
    ]),
  );
  // Only when set, so that a message without them hashes as it did before they existed.
  const { maxTurns, maxBudgetUsd, approvals, attachments } = message.options ?? NO_RUN_OPTIONS;
  if (maxTurns !== null || maxBudgetUsd !== null || attachments.length > 0) {
    hash.update(JSON.stringify({ maxTurns, maxBudgetUsd, attachments }));
  }
  // Apart, so that the hash of a message without them stays what it was.
  if (approvals !== null) {
    hash.update(JSON.stringify({ approvals }));
  }
  const { permissionMode, model, effort } = message.options ?? NO_RUN_OPTIONS;
  if (permissionMode !== null || model !== null || effort !== null) {
    hash.update(JSON.stringify({ permissionMode, model, effort }));
  }
  if (message.outputSchema) hash.update(JSON.stringify({ outputSchema: message.outputSchema }));
  return hash.digest("hex");
}

/** The run the key already names, if any; throws IdempotencyConflictError for another request. */
export async function findIdempotentRun(
  db: Database,
  sessionId: string,
  key: string,
  requestHash: string | null,
) {
  const earlier = await findRunByIdempotencyKey(db, sessionId, key);
  if (!earlier) return undefined;
  if (Date.now() - earlier.createdAt.getTime() > IDEMPOTENCY_WINDOW_MS) {
    await expireIdempotencyKey(db, sessionId, key, new Date(Date.now() - IDEMPOTENCY_WINDOW_MS));
    return undefined;
  }
  if (earlier.requestHash !== requestHash) throw new IdempotencyConflictError(earlier.id);
  return earlier;
}
