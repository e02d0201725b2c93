import { randomUUID } from "node:crypto";
import {
  and,
  asc,
  count,
  eq,
  getTableColumns,
  inArray,
  isNotNull,
  isNull,
  lt,
  notExists,
  sql,
} from "drizzle-orm";
import { alias } from "drizzle-orm/pg-core";
import type { Database } from "./db.js";
import { newestFirst, olderThan } from "./paging.js";
import { preparedFor } from "./prepared.js";
import { WORK_CHANNEL } from "./run-claims.js";
import { ACTIVE_STATUSES, cliSessionStarted } from "./runs.js";
import { type RunRow, runs, type SessionRow, type StoredImage, sessions } from "./schema.js";

// What admitting a message as a run reads and writes: the run's row, the locks and counts its
// limits are checked under, its idempotency key, the session's state, a retry's resume point, and
// a waiting run's move into the queue.

export interface NewRun {
  sessionId: string;
  /**
   * The instance that admits the run, and executes it; null on a queued run left for any instance
   * to claim (with `handover` set), and on runs of versions before instances.
   */
  instanceId: string | null;
  /** What the message set for the run alone, for the instance that claims it (see handover.ts). */
  handover?: unknown;
  /** The pull (merge) request whose head the run checks out first. */
  checkout?: unknown;
  /** Where its sandbox may connect, besides its key's list (see the runs table). */
  egress?: string[] | null;
  /** Only an instance of this host may claim the run. */
  pinnedHost?: string | null;
  /** The session's agent: a run is always of its session's agent. */
  agent: string;
  /** `waiting`: in line behind the session's active run (a webhook delivery); default `queued`. */
  status?: "queued" | "waiting";
  trigger: string;
  prompt: string;
  systemPrompt: string | null;
  /** The JSON Schema the run's answer must match; null: none. */
  outputSchema?: Record<string, unknown> | null;
  /** The images its message carried, named and measured (no bytes); null: none. */
  images?: StoredImage[] | null;
  idempotencyKey: string | null;
  requestHash: string | null;
}

/** Inserts a queued run; throws a unique violation when the session already has an active run. */
export async function insertRun(db: Database, input: NewRun): Promise<RunRow> {
  const [row] = await db
    .insert(runs)
    .values({ id: randomUUID(), status: "queued", createdAt: new Date(), ...input })
    .returning();
  if (!row) throw new Error("insert into runs returned no row");
  return row;
}

/**
 * Makes the transaction's caller the only one counting and adding runs of this key until it
 * commits, on any instance: the per-key limit holds however many submit at once.
 */
export async function lockKeyRuns(tx: Database, keyId: string): Promise<void> {
  await tx.execute(sql`select pg_advisory_xact_lock(hashtextextended(${`key-runs:${keyId}`}, 0))`);
}

/** Makes the transaction's caller the only one counting and adding unowned queued runs. */
export async function lockUnownedRuns(tx: Database): Promise<void> {
  await tx.execute(sql`select pg_advisory_xact_lock(hashtextextended('unowned-runs', 0))`);
}

/** Queued runs no instance has claimed yet. */
export async function countUnownedRuns(db: Database): Promise<number> {
  const [row] = await db
    .select({ n: count() })
    .from(runs)
    .where(and(eq(runs.status, "queued"), isNull(runs.instanceId)));
  return row?.n ?? 0;
}

/** Runs of the key's sessions that are waiting, queued or running, on any instance. */
export async function countOpenRunsOfKey(db: Database, keyId: string): Promise<number> {
  const [row] = await db
    .select({ n: count() })
    .from(runs)
    .innerJoin(sessions, eq(sessions.id, runs.sessionId))
    // Written out, not bound, so that the planner reads the open runs from their partial index.
    .where(
      and(eq(sessions.ownerKeyId, keyId), sql`${runs.status} in ('queued', 'running', 'waiting')`),
    );
  return row?.n ?? 0;
}

export async function findRunByIdempotencyKey(
  db: Database,
  sessionId: string,
  key: string,
): Promise<RunRow | undefined> {
  const [row] = await db
    .select()
    .from(runs)
    .where(and(eq(runs.sessionId, sessionId), eq(runs.idempotencyKey, key)));
  return row;
}

/** Frees keys older than `before` so that they may be used again. */
export async function expireIdempotencyKey(
  db: Database,
  sessionId: string,
  key: string,
  before: Date,
) {
  await db
    .update(runs)
    .set({ idempotencyKey: null })
    .where(
      and(eq(runs.sessionId, sessionId), eq(runs.idempotencyKey, key), lt(runs.createdAt, before)),
    );
}

const admissionRead = preparedFor((db) => {
  const id = sql.placeholder("id");
  return db
    .select({
      session: sessions,
      expired: sql<boolean>`${sessions.expiredAt} is not null`,
      activeRunId: sql<string | null>`(${db
        .select({ id: runs.id })
        .from(runs)
        .where(and(eq(runs.sessionId, sessions.id), inArray(runs.status, [...ACTIVE_STATUSES])))
        .limit(1)})`,
      waitingRunId: sql<string | null>`(${db
        .select({ id: runs.id })
        .from(runs)
        .where(and(eq(runs.sessionId, sessions.id), eq(runs.status, "waiting")))
        .orderBy(asc(runs.admissionSeq))
        .limit(1)})`,
      resume: cliSessionStarted(sessions.id),
    })
    .from(sessions)
    .where(eq(sessions.id, id))
    .prepare("admission_state");
});

/**
 * What admitting a message to the session depends on, read in one statement: the session's row
 * as it is now (the sweep may have expired it since the route read it, a run of it may have ended
 * since), its active run if any, the first of its waiting runs if any (on whichever instance),
 * and whether its run will resume the CLI's session.
 */
export async function admissionState(
  db: Database,
  sessionId: string,
): Promise<
  | {
      session: SessionRow;
      expired: boolean;
      activeRunId: string | null;
      waitingRunId: string | null;
      resume: boolean;
    }
  | undefined
> {
  const [row] = await admissionRead(db).execute({ id: sessionId });
  return row;
}

/**
 * What a retry of `runId` needs of its session: the session's newest run (a retry must be of
 * it), and the last message a run before `runId` confirmed (`resume_at`), where the retry
 * resumes the conversation; null when none did.
 */
export async function retryPoint(
  db: Database,
  sessionId: string,
  runId: string,
): Promise<{ latest: RunRow | undefined; resumeAt: string | null }> {
  const [latest] = await db
    .select()
    .from(runs)
    .where(eq(runs.sessionId, sessionId))
    .orderBy(...newestFirst(runs.createdAt, runs.id))
    .limit(1);
  if (latest?.id !== runId) return { latest, resumeAt: null };
  const [confirmed] = await db
    .select({ uuid: runs.lastMessageUuid })
    .from(runs)
    .where(
      and(
        eq(runs.sessionId, sessionId),
        isNotNull(runs.lastMessageUuid),
        olderThan(runs.createdAt, runs.id, latest),
      ),
    )
    .orderBy(...newestFirst(runs.createdAt, runs.id))
    .limit(1);
  return { latest, resumeAt: confirmed?.uuid ?? null };
}

/**
 * Moves a waiting run into the queue, saying whether it resumes the CLI's session, when it is
 * first in its session's line (no waiting run of the session was written before it, by any
 * instance); `behind` when one was. Throws a unique violation while the session still has an
 * active run, and returns undefined when the run is gone (or no longer waiting).
 */
export async function promoteWaitingRun(
  db: Database,
  id: string,
): Promise<{ run: RunRow; resume: boolean } | "behind" | undefined> {
  const earlier = alias(runs, "earlier");
  const [row] = await db
    .update(runs)
    .set({ status: "queued" })
    .where(
      and(
        eq(runs.id, id),
        eq(runs.status, "waiting"),
        notExists(
          db
            .select({ id: earlier.id })
            .from(earlier)
            .where(
              and(
                eq(earlier.sessionId, runs.sessionId),
                eq(earlier.status, "waiting"),
                lt(earlier.admissionSeq, runs.admissionSeq),
              ),
            ),
        ),
      ),
    )
    .returning({ run: getTableColumns(runs), resume: cliSessionStarted(runs.sessionId) });
  if (row) return row;
  const [still] = await db
    .select({ id: runs.id })
    .from(runs)
    .where(and(eq(runs.id, id), eq(runs.status, "waiting")));
  return still ? "behind" : undefined;
}

/**
 * Rings every instance (the work channel: src/cluster/doorbell.ts) when runs of the session wait
 * for it, so that the one holding the first of them promotes it without waiting for its poll;
 * sent at commit, with the completion of the run that ends (which may free the session).
 */
export async function ringForWaitingRuns(db: Database, sessionId: string): Promise<void> {
  await db.execute(
    sql`select pg_notify(${WORK_CHANNEL}, '') where exists (${db
      .select({ id: runs.id })
      .from(runs)
      .where(and(eq(runs.sessionId, sessionId), eq(runs.status, "waiting")))})`,
  );
}
