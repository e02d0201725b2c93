import { randomUUID } from "node:crypto";
import { and, desc, eq, gt, inArray, lt, ne, or, sql } from "drizzle-orm";
import type { Database } from "./db.js";
import { newestFirst, olderThan, type PageKey } from "./paging.js";
import { type HookDeliveryRow, hookDeliveries, hookSessions, runs } from "./schema.js";

// What a hook receives: its deliveries (a sender's, a schedule's tick, a body's guard), how each
// is settled, and the session a delivery's key leads to.

/** A delivery (or tick) still `received` after this long was left by a process that died starting its run. */
const RECEIPT_STALE_MS = 60_000;

export interface NewDelivery {
  hookId: string;
  deliveryId: string;
  source: "webhook" | "schedule";
  event: string;
  outcome: string;
  detail?: string | null;
}

/** Records a delivery; throws a unique violation when the hook already has one with that id. */
export async function insertDelivery(db: Database, input: NewDelivery): Promise<HookDeliveryRow> {
  const [row] = await db
    .insert(hookDeliveries)
    .values({ id: randomUUID(), receivedAt: new Date(), detail: null, ...input })
    .returning();
  if (!row) throw new Error("insert into hook_deliveries returned no row");
  return row;
}

/**
 * A body's guard is a row of hook_deliveries too (no column of its own is needed): its delivery
 * id is this prefix and the body's SHA-256, its `detail` the id of the delivery that body came
 * with. Senders' ids with this prefix are refused, and the listing leaves these rows out.
 */
export const BODY_GUARD_PREFIX = "body-sha256:";
const BODY_GUARD_SOURCE = "body_guard";

/** A schedule's tick is a delivery whose id is this prefix and its fire time. */
export const SCHEDULE_DELIVERY_PREFIX = "schedule:";

/**
 * Delivery ids the bridge makes itself: a sender's id in one of these forms could take the place
 * of a body's guard or of a schedule's tick (and so suppress it), so it is refused.
 */
export const RESERVED_DELIVERY_ID_PREFIXES = [BODY_GUARD_PREFIX, SCHEDULE_DELIVERY_PREFIX];

/**
 * Records a delivery unless its body came with another delivery id within `windowMs`, for a
 * sender whose signature covers the body but not the id (GitHub): one captured body cannot be
 * sent again under made-up ids. Returns the delivery, or the id the body came with first. The
 * guard and the delivery are written together, so the delivery a guard names exists; a delivery
 * of an id already recorded throws a unique violation, as `insertDelivery` does.
 */
export async function insertDeliveryOfBody(
  db: Database,
  input: NewDelivery,
  body: { sha256: string; windowMs: number },
): Promise<{ delivery: HookDeliveryRow } | { firstDeliveryId: string }> {
  const guard = and(
    eq(hookDeliveries.hookId, input.hookId),
    eq(hookDeliveries.deliveryId, `${BODY_GUARD_PREFIX}${body.sha256}`),
  );
  return db.transaction(async (tx) => {
    const now = new Date();
    const receipt = { receivedAt: now, detail: input.deliveryId };
    const [inserted] = await tx
      .insert(hookDeliveries)
      .values({
        id: randomUUID(),
        hookId: input.hookId,
        deliveryId: `${BODY_GUARD_PREFIX}${body.sha256}`,
        source: BODY_GUARD_SOURCE,
        event: input.event,
        outcome: "guard",
        ...receipt,
      })
      .onConflictDoNothing()
      .returning({ id: hookDeliveries.id });
    if (!inserted) {
      // Taken over when it has expired, names this very id (the sender's own retry), or names a
      // delivery that is gone (a failed one forgotten by a retry that never came).
      const [taken] = await tx
        .update(hookDeliveries)
        .set(receipt)
        .where(
          and(
            guard,
            or(
              lt(hookDeliveries.receivedAt, new Date(now.getTime() - body.windowMs)),
              eq(hookDeliveries.detail, input.deliveryId),
              sql`not exists (select 1 from hook_deliveries d where d.hook_id = ${input.hookId} and d.delivery_id = hook_deliveries.detail)`,
            ),
          ),
        )
        .returning({ id: hookDeliveries.id });
      if (!taken) {
        const [held] = await tx
          .select({ firstDeliveryId: hookDeliveries.detail })
          .from(hookDeliveries)
          .where(guard);
        return { firstDeliveryId: held?.firstDeliveryId ?? "" };
      }
    }
    return { delivery: await insertDelivery(tx, input) };
  });
}

export async function findDelivery(
  db: Database,
  hookId: string,
  deliveryId: string,
): Promise<HookDeliveryRow | undefined> {
  const [row] = await db
    .select()
    .from(hookDeliveries)
    .where(and(eq(hookDeliveries.hookId, hookId), eq(hookDeliveries.deliveryId, deliveryId)));
  return row;
}

export async function settleDelivery(
  db: Database,
  id: string,
  outcome: { outcome: string; detail?: string | null; runId?: string; sessionId?: string },
) {
  await db
    .update(hookDeliveries)
    .set({ detail: null, ...outcome })
    .where(eq(hookDeliveries.id, id));
}

/**
 * Settles as failed the hook's deliveries still `received` after RECEIPT_STALE_MS: starting a run
 * takes milliseconds, so such a delivery was left by a process that died (or lost its database)
 * while starting it, and nothing else will ever move it on.
 */
export async function settleAbandonedDeliveries(db: Database, hookId: string) {
  await db
    .update(hookDeliveries)
    .set({
      outcome: "failed",
      detail: "abandoned: the server stopped before it had started the run",
    })
    .where(
      and(
        eq(hookDeliveries.hookId, hookId),
        eq(hookDeliveries.outcome, "received"),
        lt(hookDeliveries.receivedAt, new Date(Date.now() - RECEIPT_STALE_MS)),
      ),
    );
}

/** Frees a delivery id whose first delivery could not start a run, so that a retry may. */
export async function forgetFailedDelivery(db: Database, id: string) {
  await db
    .delete(hookDeliveries)
    .where(and(eq(hookDeliveries.id, id), eq(hookDeliveries.outcome, "failed")));
}

/** Newest first, paged by (received_at, id) like the sessions. */
export async function listDeliveries(
  db: Database,
  hookId: string,
  page: { limit: number; after?: PageKey },
): Promise<HookDeliveryRow[]> {
  return db
    .select()
    .from(hookDeliveries)
    .where(
      and(
        eq(hookDeliveries.hookId, hookId),
        ne(hookDeliveries.source, BODY_GUARD_SOURCE),
        olderThan(hookDeliveries.receivedAt, hookDeliveries.id, page.after),
      ),
    )
    .orderBy(...newestFirst(hookDeliveries.receivedAt, hookDeliveries.id))
    .limit(page.limit);
}

/**
 * The hook's last scheduled tick that is still going: recorded but not started yet, or whose run
 * has not finished. A new tick is skipped while there is one.
 */
export async function busyScheduledDelivery(
  db: Database,
  hookId: string,
): Promise<HookDeliveryRow | undefined> {
  const [row] = await db
    .select({ delivery: hookDeliveries })
    .from(hookDeliveries)
    .leftJoin(runs, eq(runs.id, hookDeliveries.runId))
    .where(
      and(
        eq(hookDeliveries.hookId, hookId),
        eq(hookDeliveries.source, "schedule"),
        or(
          // A tick recorded by a process that died before starting its run holds nothing for long.
          and(
            eq(hookDeliveries.outcome, "received"),
            gt(hookDeliveries.receivedAt, new Date(Date.now() - RECEIPT_STALE_MS)),
          ),
          and(
            eq(hookDeliveries.outcome, "accepted"),
            inArray(runs.status, ["waiting", "queued", "running"]),
          ),
        ),
      ),
    )
    .orderBy(desc(hookDeliveries.receivedAt))
    .limit(1);
  return row?.delivery;
}

// Session keys

export async function sessionForKey(
  db: Database,
  hookId: string,
  key: string,
): Promise<string | undefined> {
  const [row] = await db
    .select({ sessionId: hookSessions.sessionId })
    .from(hookSessions)
    .where(and(eq(hookSessions.hookId, hookId), eq(hookSessions.key, key)));
  return row?.sessionId;
}

/** Points the key at the session unless another delivery got there first; returns the winner. */
export async function bindSessionKey(
  db: Database,
  hookId: string,
  key: string,
  sessionId: string,
): Promise<string> {
  const [row] = await db
    .insert(hookSessions)
    .values({ hookId, key, sessionId, createdAt: new Date() })
    .onConflictDoNothing()
    .returning({ sessionId: hookSessions.sessionId });
  return row?.sessionId ?? (await sessionForKey(db, hookId, key)) ?? sessionId;
}

/** Moves the key to a new session (its old one expired). */
export async function replaceSessionKey(
  db: Database,
  hookId: string,
  key: string,
  sessionId: string,
) {
  await db
    .update(hookSessions)
    .set({ sessionId })
    .where(and(eq(hookSessions.hookId, hookId), eq(hookSessions.key, key)));
}
