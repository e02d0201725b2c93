import { and, asc, eq, gt, inArray, type SQL, sql } from "drizzle-orm";
import type { CompletionEvent } from "../events.js";
import { type Database, returnedRows } from "./db.js";
import {
  type FeedEventRow,
  feedEvents,
  type PermissionRequestRow,
  type RunRow,
  type SessionRow,
} from "./schema.js";

// The live feed's rows (GET /v1/events): appended in the transaction that does what they report,
// read in id order, pruned by the sweep.
//
// Ids commit in order. A bigserial alone does not: a transaction that took id 10 may commit after
// one that took 11, and a reader that saw 11 and resumes after it would never see 10. So every
// append takes one advisory lock, held until its transaction ends, before it takes its ids: the
// next append can take an id only once this one has committed (or rolled back). An append is the
// last statement of its transaction, so the lock is held only for its commit.

export const FEED_EVENT_TYPES = [
  "session_created",
  "session_deleted",
  "run_queued",
  "run_started",
  "run_finished",
  "permission_requested",
  "permission_resolved",
] as const;
export type FeedEventType = (typeof FEED_EVENT_TYPES)[number];

/** The doorbell's channel for new feed rows; the payload is the highest id stored. */
export const FEED_CHANNEL = "agent_bridge_feed";

export interface FeedEntry {
  type: FeedEventType;
  /** Undefined: the session of `runId`, looked up in the statement. */
  sessionId?: string;
  runId?: string | null;
  /** Undefined: the owner of the session, looked up in the statement (gone once it is deleted). */
  ownerKeyId?: string | null;
  /** The type's own fields. */
  data: Record<string, unknown>;
}

/**
 * Appends feed events and rings the feed's doorbell (NOTIFY, delivered at commit). Call it last
 * in the transaction that does what the events report: see above for the lock it takes.
 */
export async function appendFeed(tx: Database, entries: FeedEntry[]): Promise<void> {
  if (entries.length === 0) return;
  await tx.execute(sql`select pg_advisory_xact_lock(hashtextextended('feed-events', 0))`);
  const createdAt = new Date().toISOString();
  const rows = entries.map((e) => {
    const session =
      e.sessionId !== undefined
        ? sql`${e.sessionId}::uuid`
        : sql`(select r.session_id from runs r where r.id = ${e.runId ?? null}::uuid)`;
    const owner =
      e.ownerKeyId !== undefined
        ? sql`${e.ownerKeyId}::uuid`
        : sql`(select s.owner_key_id from sessions s where s.id = ${session})`;
    return sql`(${e.type}, ${owner}, ${session}, ${e.runId ?? null}::uuid, ${JSON.stringify(e.data)}, ${createdAt}::timestamptz)`;
  });
  await tx.execute(sql`
    with stored as (
      insert into ${feedEvents} (type, owner_key_id, session_id, run_id, data, created_at)
      values ${sql.join(rows, sql`, `)}
      returning id)
    select pg_notify(${FEED_CHANNEL}, max(id)::text) from stored`);
}

/** A session was made (created, or forked from another: `forked_from` says which). */
export const sessionCreated = (session: SessionRow): FeedEntry => ({
  type: "session_created",
  sessionId: session.id,
  ownerKeyId: session.ownerKeyId,
  data: {
    agent: session.agent,
    title: session.title,
    ...(session.forkedFrom ? { forked_from: session.forkedFrom.sessionId } : {}),
  },
});

/** A run was admitted: queued for a slot, or waiting behind its session's active run. */
export const runQueued = (run: RunRow): FeedEntry => ({
  type: "run_queued",
  sessionId: run.sessionId,
  runId: run.id,
  data: { status: run.status, trigger: run.trigger, agent: run.agent },
});

/** A run ended, with its completion's status, error code and cost. */
export const runFinished = (run: RunRow, completion: CompletionEvent): FeedEntry => ({
  type: "run_finished",
  sessionId: run.sessionId,
  runId: run.id,
  data: {
    status: completion.status,
    ...(completion.error_code ? { error_code: completion.error_code } : {}),
    cost_usd: completion.cost_usd,
    duration_ms: completion.duration_ms,
  },
});

/** A permission request of the run was answered, timed out or withdrawn. */
export const permissionResolved = (
  row: Pick<PermissionRequestRow, "runId" | "requestId" | "state" | "by">,
): FeedEntry => ({
  type: "permission_resolved",
  runId: row.runId,
  data: { request_id: row.requestId, state: row.state, by: row.by },
});

export interface FeedFilter {
  /** Only the events of sessions this key owns; undefined: every event (an admin). */
  ownerKeyId?: string | null;
  sessionId?: string;
  types?: readonly FeedEventType[];
}

/** Up to `limit` events after id `after` that pass the filter, in id order. */
export function listFeed(
  db: Database,
  after: number,
  filter: FeedFilter,
  limit: number,
): Promise<FeedEventRow[]> {
  const owner: SQL | undefined =
    filter.ownerKeyId === undefined
      ? undefined
      : filter.ownerKeyId === null
        ? sql`${feedEvents.ownerKeyId} is null`
        : eq(feedEvents.ownerKeyId, filter.ownerKeyId);
  return db
    .select()
    .from(feedEvents)
    .where(
      and(
        gt(feedEvents.id, after),
        owner,
        filter.sessionId ? eq(feedEvents.sessionId, filter.sessionId) : undefined,
        filter.types?.length ? inArray(feedEvents.type, [...filter.types]) : undefined,
      ),
    )
    .orderBy(asc(feedEvents.id))
    .limit(limit);
}

/** The lowest and highest id the feed holds (null when it is empty). */
export async function feedBounds(
  db: Database,
): Promise<{ min: number | null; max: number | null }> {
  const [row] = await db
    .select({
      min: sql<number | null>`min(${feedEvents.id})`.mapWith((v) =>
        v === null ? null : Number(v),
      ),
      max: sql<number | null>`max(${feedEvents.id})`.mapWith((v) =>
        v === null ? null : Number(v),
      ),
    })
    .from(feedEvents);
  return { min: row?.min ?? null, max: row?.max ?? null };
}

/**
 * Deletes the events stored before `cutoff`, as a prefix of the ids, and never the newest one: the
 * lowest id left then says where the feed begins, so a reader behind it learns that it missed
 * events (a `feed_reset`) instead of silently skipping them. Resolves with how many went.
 */
export async function pruneFeed(db: Database, cutoff: Date): Promise<number> {
  const result = await db.execute(sql`
    with deleted as (
      delete from ${feedEvents}
      where id <= (select max(id) from ${feedEvents} where created_at < ${cutoff.toISOString()}::timestamptz)
        and id < (select max(id) from ${feedEvents})
      returning 1)
    select count(*)::integer as n from deleted`);
  return returnedRows<{ n: number }>(result)[0]?.n ?? 0;
}
