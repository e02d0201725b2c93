import { and, asc, eq, inArray, lt, lte, or, sql } from "drizzle-orm";
import type { Database } from "./db.js";
import { type CallbackRow, callbacks } from "./schema.js";

// The callback outbox: a run's callback, due once the run completes, taken by one worker for each
// attempt, and what each attempt got.

/** The run's callback, due once the run completes (see `markCallbackDue`). */
export async function insertCallback(
  db: Database,
  input: { runId: string; url: string; secret: string },
) {
  await db.insert(callbacks).values({ ...input, state: "pending", createdAt: new Date() });
}

/** Called in the transaction that records the run's completion: the callback becomes due. */
export async function markCallbackDue(db: Database, runId: string) {
  await db
    .update(callbacks)
    .set({ nextAttemptAt: new Date() })
    .where(
      and(
        eq(callbacks.runId, runId),
        eq(callbacks.state, "pending"),
        sql`${callbacks.nextAttemptAt} is null`,
      ),
    );
}

/** The callback of each of the runs that has one. */
export async function callbacksOf(
  db: Database,
  runIds: string[],
): Promise<Map<string, CallbackRow>> {
  if (runIds.length === 0) return new Map();
  const rows = await db.select().from(callbacks).where(inArray(callbacks.runId, runIds));
  return new Map(rows.map((row) => [row.runId, row]));
}

export async function dueCallbacks(db: Database, now: Date, limit: number): Promise<string[]> {
  const rows = await db
    .select({ runId: callbacks.runId })
    .from(callbacks)
    .where(
      and(
        eq(callbacks.state, "pending"),
        lte(callbacks.nextAttemptAt, now),
        or(sql`${callbacks.lockedUntil} is null`, lt(callbacks.lockedUntil, now)),
      ),
    )
    .orderBy(asc(callbacks.nextAttemptAt))
    .limit(limit);
  return rows.map((r) => r.runId);
}

/**
 * Takes the callback for one attempt when it is still due and nobody holds it; the conditional
 * update is the lock, so two workers (or two processes) never send the same attempt.
 */
export async function claimCallback(
  db: Database,
  runId: string,
  now: Date,
  until: Date,
): Promise<CallbackRow | undefined> {
  const [row] = await db
    .update(callbacks)
    .set({ lockedUntil: until, attempts: sql`${callbacks.attempts} + 1` })
    .where(
      and(
        eq(callbacks.runId, runId),
        eq(callbacks.state, "pending"),
        lte(callbacks.nextAttemptAt, now),
        or(sql`${callbacks.lockedUntil} is null`, lt(callbacks.lockedUntil, now)),
      ),
    )
    .returning();
  return row;
}

export async function setCallbackBody(db: Database, runId: string, body: string) {
  await db.update(callbacks).set({ body }).where(eq(callbacks.runId, runId));
}

export async function recordCallbackAttempt(
  db: Database,
  runId: string,
  outcome:
    | { state: "delivered"; status: number }
    | { state: "pending" | "failed"; status: number | null; error: string; nextAttemptAt: Date },
) {
  const now = new Date();
  await db
    .update(callbacks)
    .set(
      outcome.state === "delivered"
        ? {
            state: "delivered",
            lastStatus: outcome.status,
            lastError: null,
            deliveredAt: now,
            lockedUntil: null,
          }
        : {
            state: outcome.state,
            lastStatus: outcome.status,
            lastError: outcome.error,
            nextAttemptAt: outcome.nextAttemptAt,
            lockedUntil: null,
          },
    )
    .where(eq(callbacks.runId, runId));
}
