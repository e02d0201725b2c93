import { randomUUID } from "node:crypto";
import {
  and,
  asc,
  eq,
  getTableColumns,
  inArray,
  isNotNull,
  lt,
  notExists,
  type SQL,
  sql,
} from "drizzle-orm";
import { alias } from "drizzle-orm/pg-core";
import {
  type Database,
  executePrepared,
  inOneRoundTrip,
  returnedRows,
  rowOf,
  statementOnce,
} from "./db.js";
import { feedAppended, feedRung, runQueuedData } from "./feed.js";
import { liveInstance } from "./instances.js";
import { newestFirst, olderThan } from "./paging.js";
import { preparedFor } from "./prepared.js";
import { WORK_CHANNEL } from "./run-claims.js";
import { ACTIVE_STATUSES, cliSessionStarted, OPEN_STATUSES_LIST } from "./runs.js";
import {
  type ApiKeyRow,
  apiKeys,
  instances,
  type RunRow,
  runs,
  type SessionRow,
  type StoredImage,
  sessions,
} from "./schema.js";

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

/** The bounds a run is admitted under, counted in the statement that writes it. */
export interface AdmissionBounds {
  /** The most runs of the key's sessions open at once (waiting, queued or running). */
  key?: { id: string; max: number };
  /**
   * The most queued runs no instance owns, per live instance; `ring` tells the instances of the
   * run (NOTIFY on the work channel) when it is one.
   */
  unowned?: { perInstance: number; ring: boolean };
}

export type Admitted =
  | { run: RunRow }
  /** Refused by the key's bound, or by the bound on unowned queued runs (at `max`). */
  | { refused: "key" | "unowned"; max: number };

/**
 * Writes a run's row and its `run_queued` feed entry in one statement, counting what its bounds
 * count in it: nothing is written when a bound is reached. Throws a unique violation when the
 * session already has an active run. Where other transactions may count and write at once
 * (Postgres), the caller holds their locks (lockAdmission) in a transaction around it, or lets
 * admitRunLocked do both; the embedded database runs one statement at a time, so there it needs no
 * transaction: each statement there holds the server's thread, and a run starts only once it is
 * written.
 */
export async function admitRun(
  db: Database,
  input: NewRun,
  bounds: AdmissionBounds,
): Promise<Admitted> {
  const { statement, read } = admission(input, bounds);
  return read(await executePrepared(db, statement));
}

/**
 * admitRun under the locks of its bounds, in a transaction of its own sent in one round trip
 * (inOneRoundTrip): the lock, then the statement, which Postgres runs once the lock is held.
 */
export async function admitRunLocked(
  db: Database,
  input: NewRun,
  bounds: AdmissionBounds,
): Promise<Admitted> {
  const { statement, read } = admission(input, bounds);
  const lock = lockStatement(bounds);
  const results = await inOneRoundTrip(db, lock ? [lock, statement] : [statement]);
  return read(results.at(-1));
}

/** The admission's statement, and what its answer says. */
function admission(
  input: NewRun,
  bounds: AdmissionBounds,
): { statement: SQL; read(result: unknown): Admitted } {
  const status = input.status ?? "queued";
  const values: Record<string, unknown> = {
    ...input,
    id: randomUUID(),
    status,
    createdAt: new Date(),
  };
  const columns = getTableColumns(runs);
  const named = Object.keys(values).flatMap((key) => {
    const column = columns[key as keyof typeof columns];
    return column && values[key] !== undefined ? [[key, column] as const] : [];
  });
  const { key, unowned } = bounds;
  const keyOpen = key
    ? sql`(select count(*) from ${runs} r join ${sessions} s on s.id = r.session_id
        where s.owner_key_id = ${key.id}::uuid and r.status in ${OPEN_STATUSES_LIST})`
    : sql`0`;
  // This instance counts even before its lease is registered (an app built in a test).
  const unownedMax = unowned
    ? sql`(${unowned.perInstance}::numeric * (select greatest(1, count(*)) from ${instances}
        where ${liveInstance}))`
    : sql`0`;
  const unownedQueued = unowned
    ? sql`(select count(*) from ${runs} where status = 'queued' and instance_id is null)`
    : sql`0`;
  const statement = sql`
    with bounds as (select ${keyOpen} as key_open, ${unownedQueued} as unowned, ${unownedMax} as unowned_max),
    admitted as (
      insert into ${runs} (${sql.join(
        named.map(([, column]) => sql.identifier(column.name)),
        sql`, `,
      )})
      select ${sql.join(
        named.map(
          ([name, column]) =>
            sql`${sql.param(values[name], column)}::${sql.raw(column.getSQLType())}`,
        ),
        sql`, `,
      )}
      from bounds
      where ${key ? sql`key_open < ${key.max}::bigint` : sql`true`}
        and ${unowned ? sql`unowned < unowned_max` : sql`true`}
      returning *),
    ${feedAppended(sql`select 'run_queued', s.owner_key_id, a.session_id, a.id,
      ${runQueuedData({ status, trigger: input.trigger, agent: input.agent })}, a.created_at
      from admitted a join ${sessions} s on s.id = a.session_id`)}
    select admitted.*, bounds.*, ${feedRung} as rung
      ${unowned?.ring ? sql`, case when admitted.id is not null then pg_notify(${WORK_CHANNEL}, ${input.pinnedHost ?? ""}) end as work_rung` : sql``}
    from bounds left join admitted on true`;
  const read = (result: unknown): Admitted => {
    const [row] = returnedRows<Record<string, unknown>>(result);
    if (!row) throw new Error("the admission statement returned no row");
    if (row.id !== null) return { run: rowOf(columns, row) as RunRow };
    if (key && Number(row.key_open) >= key.max) return { refused: "key", max: key.max };
    return { refused: "unowned", max: Number(row.unowned_max) };
  };
  return { statement, read };
}

/**
 * Makes the transaction's caller the only one counting and adding what `bounds` count (runs of its
 * key, unowned queued runs) until it commits, on any instance: the bounds hold however many
 * submit at once.
 */
export async function lockAdmission(tx: Database, bounds: AdmissionBounds): Promise<void> {
  const lock = lockStatement(bounds);
  if (lock) await executePrepared(tx, lock);
}

function lockStatement(bounds: AdmissionBounds): SQL | undefined {
  const locks = [
    ...(bounds.key
      ? [sql`pg_advisory_xact_lock(hashtextextended(${`key-runs:${bounds.key.id}`}, 0))`]
      : []),
    ...(bounds.unowned ? [sql`pg_advisory_xact_lock(hashtextextended('unowned-runs', 0))`] : []),
  ];
  return locks.length > 0 ? sql`select ${sql.join(locks, sql`, `)}` : undefined;
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
      ownerKey: apiKeys,
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
    .leftJoin(apiKeys, eq(apiKeys.id, sessions.ownerKeyId))
    .where(eq(sessions.id, id))
    .prepare("admission_state");
});

export interface AdmissionState {
  session: SessionRow;
  /** The key that owns the session (its policy rules on the run); null: none, or gone. */
  ownerKey: ApiKeyRow | null;
  expired: boolean;
  activeRunId: string | null;
  waitingRunId: string | null;
  resume: boolean;
}

/**
 * What admitting a message to the session depends on, read in one statement: the session's row
 * as it is now (the sweep may have expired it since the route read it, a run of it may have ended
 * since), its key's row for the run's gate, its active run if any, the first of its waiting runs
 * if any (on whichever instance), and whether its run will resume the CLI's session.
 */
export async function admissionState(
  db: Database,
  sessionId: string,
): Promise<AdmissionState | undefined> {
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
 * The statement that rings every instance (the work channel: src/cluster/doorbell.ts) when runs
 * of the session `sessionId` wait for it, so that the one holding the first of them promotes it
 * without waiting for its poll; sent at commit, with the completion of the run that ends (which
 * may free the session).
 */
export const waitingRunsRung = statementOnce(
  () => sql`select pg_notify(${WORK_CHANNEL}, '') where exists (
    select 1 from ${runs} where session_id = ${sql.placeholder("sessionId")}::uuid
    and status = 'waiting')`,
);
