import { and, asc, eq, inArray, type SQL, sql } from "drizzle-orm";
import type { CompletionEvent } from "../events.js";
import { type Database, executePrepared, returnedRows } from "./db.js";
import {
  type FeedEventRow,
  feedEvents,
  type PermissionRequestRow,
  type RunRow,
  type SessionRow,
} from "./schema.js";

// The live feed's rows (GET /v1/events): appended in the transaction that does what they report,
// read in (xid, id) order, pruned by the sweep.
//
// Ids do not commit in order: a transaction that took id 10 may commit after one that took 11, and
// a reader that saw 11 and resumes after it would never see 10. So each row records its writer's
// transaction id (`xid`, a column default), and a reader takes only the rows whose xid is below its
// snapshot's xmin: every transaction older than that has ended, and any row that commits later
// has an xid at or above it, so it sorts after every row read. A position is the (xid, id) of the
// last row read. An open (or stalled) writer delays the delivery of later rows until it ends;
// nothing is skipped and no writer waits for another (a lock did that: a paused instance inside
// an append held up every other instance's run completions).
//
// xid8 values are 64-bit: they stay decimal text in JS and are compared in SQL only.

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
 * Appends feed events and rings the feed's doorbell (NOTIFY, delivered at commit), in the
 * transaction that does what the events report.
 */
export async function appendFeed(tx: Database, entries: FeedEntry[]): Promise<void> {
  if (entries.length === 0) return;
  const statement = feedEntriesAppended(entries);
  // One entry (a run's end, a session made): one of a few texts, prepared; a list, not.
  await (entries.length === 1 ? executePrepared(tx, statement) : tx.execute(statement));
}

/** appendFeed's statement, of at least one entry. */
export function feedEntriesAppended(entries: FeedEntry[]): SQL {
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
  return sql`with ${storedInFeed(sql`values ${sql.join(rows, sql`, `)}`)}`;
}

/**
 * The part of a `with` statement, named `stored`, that appends to the feed the rows `rows` gives
 * (its columns: type, owner_key_id, session_id, run_id, data, created_at).
 */
export const feedAppended = (rows: SQL) => sql`stored as (
      insert into ${feedEvents} (type, owner_key_id, session_id, run_id, data, created_at)
      ${rows}
      returning id)`;

/** Rings the feed's doorbell once when `stored` (feedAppended) appended any rows: a value of its select. */
export const feedRung = sql`(select pg_notify(${FEED_CHANNEL}, max(id)::text) from stored having count(*) > 0)`;

/**
 * The tail of a `with` statement that appends to the feed the rows `rows` gives and rings the
 * feed's doorbell: one statement with what the rows report.
 */
export const storedInFeed = (rows: SQL) => sql`${feedAppended(rows)} select ${feedRung}`;

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

/**
 * The data of a `run_queued` entry, as stored: a run was admitted, queued for a slot or waiting
 * behind its session's active run.
 */
export const runQueuedData = (run: Pick<RunRow, "status" | "trigger" | "agent">): string =>
  JSON.stringify({ status: run.status, trigger: run.trigger, agent: run.agent });

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

/** A place in the feed: after the row (xid, id). Decimal text, compared in SQL only. */
export interface FeedPosition {
  xid: string;
  id: string;
}

/** Before every row: `0` (everything the feed holds). */
export const FEED_BEGINNING: FeedPosition = { xid: "0", id: "0" };

const MAX_XID8 = 2n ** 64n - 1n;
const MAX_BIGINT = 2n ** 63n - 1n;

/** A position as clients see it (the SSE `id:`): `<xid>-<id>`, or `0` for the beginning. */
export function feedPositionText(p: FeedPosition): string {
  return p.xid === "0" && p.id === "0" ? "0" : `${p.xid}-${p.id}`;
}

/** The position of a `feedPositionText` (`0` or empty: the beginning); undefined if it is none. */
export function parseFeedPosition(text: string): FeedPosition | undefined {
  if (text === "" || text === "0") return FEED_BEGINNING;
  const match = /^(\d{1,20})-(\d{1,19})$/.exec(text);
  if (!match) return undefined;
  const xid = BigInt(match[1] ?? "");
  const id = BigInt(match[2] ?? "");
  if (xid > MAX_XID8 || id > MAX_BIGINT) return undefined;
  return { xid: xid.toString(), id: id.toString() };
}

/** A row's position. */
export const positionOf = (row: Pick<FeedEventRow, "xid" | "id">): FeedPosition => ({
  xid: row.xid,
  id: String(row.id),
});

const isBeginning = (p: FeedPosition) => p.xid === "0" && p.id === "0";

/** Rows no transaction still open can come before: below the oldest open transaction. */
const settled = sql`${feedEvents.xid} < pg_snapshot_xmin(pg_current_snapshot())`;
const after = (p: FeedPosition) =>
  sql`(${feedEvents.xid}, ${feedEvents.id}) > (${p.xid}::xid8, ${p.id}::bigint)`;

export interface FeedFilter {
  /** Only the events of sessions this key owns; undefined: every event (an admin). */
  ownerKeyId?: string | null;
  sessionId?: string;
  types?: readonly FeedEventType[];
}

function filtered(filter: FeedFilter): (SQL | undefined)[] {
  const owner: SQL | undefined =
    filter.ownerKeyId === undefined
      ? undefined
      : filter.ownerKeyId === null
        ? sql`${feedEvents.ownerKeyId} is null`
        : eq(feedEvents.ownerKeyId, filter.ownerKeyId);
  return [
    owner,
    filter.sessionId ? eq(feedEvents.sessionId, filter.sessionId) : undefined,
    filter.types?.length ? inArray(feedEvents.type, [...filter.types]) : undefined,
  ];
}

/**
 * Up to `limit` settled events after `position` that pass the filter, in (xid, id) order: none
 * that an open transaction may still precede.
 */
export function listFeed(
  db: Database,
  position: FeedPosition,
  filter: FeedFilter,
  limit: number,
): Promise<FeedEventRow[]> {
  return db
    .select()
    .from(feedEvents)
    .where(and(settled, isBeginning(position) ? undefined : after(position), ...filtered(filter)))
    .orderBy(asc(feedEvents.xid), asc(feedEvents.id))
    .limit(limit);
}

/** What a reader at a position has still to read. */
export interface FeedPending {
  /** Settled events it can read now. */
  settled: boolean;
  /**
   * Events stored but held back, as an older transaction is still open: it looks again soon,
   * since that transaction's end rings the doorbell only if it appended to the feed.
   */
  heldBack: boolean;
  /** The newest transaction (its xid) of either; null: nothing to read. */
  newest: string | null;
}

/** What is stored after `position` that passes the filter (`upTo`: of transactions up to it). */
export async function feedPending(
  db: Database,
  position: FeedPosition,
  filter: FeedFilter,
  upTo?: string,
): Promise<FeedPending> {
  const [row] = await db
    .select({
      settled: sql<boolean>`coalesce(bool_or(${settled}), false)`,
      heldBack: sql<boolean>`coalesce(bool_or(not (${settled})), false)`,
      newest: sql<string | null>`max(${feedEvents.xid})::text`,
    })
    .from(feedEvents)
    .where(
      and(
        isBeginning(position) ? undefined : after(position),
        upTo === undefined ? undefined : sql`${feedEvents.xid} <= ${upTo}::xid8`,
        ...filtered(filter),
      ),
    );
  return {
    settled: row?.settled ?? false,
    heldBack: row?.heldBack ?? false,
    newest: row?.newest ?? null,
  };
}

/** Where the feed stands, and how a position a reader resumes from compares with it. */
export interface FeedBounds {
  /** Just before the first row the feed holds (null when it is empty). */
  floor: FeedPosition | null;
  /** The last settled row (null when there is none). */
  last: FeedPosition | null;
  /** `resume` is before `floor` (events after it were pruned) or after `last` (never given). */
  lost: boolean;
}

/** The feed's bounds, and whether a reader at `resume` (not the beginning) lost events. */
export async function feedBounds(db: Database, resume: FeedPosition): Promise<FeedBounds> {
  const r = sql`(${resume.xid}::xid8, ${resume.id}::bigint)`;
  const result = await db.execute(sql`
    with first as (
      select xid, id from ${feedEvents} order by xid, id limit 1),
    last as (
      select xid, id from ${feedEvents}
      where xid < pg_snapshot_xmin(pg_current_snapshot())
      order by xid desc, id desc limit 1)
    select first.xid::text as floor_xid, (first.id - 1)::text as floor_id,
      last.xid::text as last_xid, last.id::text as last_id,
      coalesce(${r} < (first.xid, first.id - 1), false)
        or coalesce(${r} > (last.xid, last.id), true) as lost
    from (select 1) as one left join first on true left join last on true`);
  const [row] = returnedRows<{
    floor_xid: string | null;
    floor_id: string | null;
    last_xid: string | null;
    last_id: string | null;
    lost: boolean;
  }>(result);
  return {
    floor: row?.floor_xid && row.floor_id ? { xid: row.floor_xid, id: row.floor_id } : null,
    last: row?.last_xid && row.last_id ? { xid: row.last_xid, id: row.last_id } : null,
    lost: !isBeginning(resume) && (row?.lost ?? true),
  };
}

/**
 * Deletes the settled events stored before `cutoff`, as a prefix in (xid, id) order, and never the
 * last settled one: the first row left then says where the feed begins, so a reader behind it
 * learns that it missed events (a `feed_reset`) instead of silently skipping them, and the last
 * says how far it ever went. Resolves with how many went.
 */
export async function pruneFeed(db: Database, cutoff: Date): Promise<number> {
  const result = await db.execute(sql`
    with settled as (
      select xid, id, created_at from ${feedEvents}
      where xid < pg_snapshot_xmin(pg_current_snapshot())),
    deleted as (
      delete from ${feedEvents} f
      where (f.xid, f.id) <= (
          select xid, id from settled where created_at < ${cutoff.toISOString()}::timestamptz
          order by xid desc, id desc limit 1)
        and (f.xid, f.id) < (select xid, id from settled order by xid desc, id desc limit 1)
      returning 1)
    select count(*)::integer as n from deleted`);
  return returnedRows<{ n: number }>(result)[0]?.n ?? 0;
}
