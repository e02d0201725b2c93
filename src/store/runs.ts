import { randomUUID } from "node:crypto";
import {
  and,
  count,
  eq,
  getTableColumns,
  inArray,
  isNotNull,
  isNull,
  lt,
  or,
  sql,
} from "drizzle-orm";
import { type AnyPgColumn, alias, QueryBuilder } from "drizzle-orm/pg-core";
import type { Usage } from "../events.js";
import type { Principal } from "../principal.js";
import type { Database } from "./db.js";
import { addKeySpend } from "./keys.js";
import { hasModelCalls } from "./model-calls.js";
import { newestFirst, olderThan, type PageKey } from "./paging.js";
import { instances, type RunRow, runs, sessions } from "./schema.js";
import { sessionUsageColumns, visibleTo } from "./sessions.js";

export const ACTIVE_STATUSES = ["queued", "running"] as const;
/** A run in one of these has no completion yet: its log still grows. */
export const OPEN_STATUSES: readonly string[] = [...ACTIVE_STATUSES, "waiting"];

/**
 * The channel on which instances are told that a queued run waits to be claimed (src/cluster/
 * claims.ts); the payload is the host it is pinned to, or empty.
 */
export const WORK_CHANNEL = "agent_bridge_work";

export interface NewRun {
  sessionId: string;
  /**
   * The instance that admits the run, and executes it; null on a queued run left for any instance
   * to claim (with `handover` set), and on runs of versions before instances.
   */
  instanceId: string | null;
  /** What the message set for the run alone, for the instance that claims it (see handover.ts). */
  handover?: unknown;
  /** Only an instance of this host may claim the run. */
  pinnedHost?: string | null;
  /** The session's agent: a run is always of its session's agent. */
  agent: string;
  /** `waiting`: in line behind the session's active run (a webhook delivery); default `queued`. */
  status?: "queued" | "waiting";
  trigger: string;
  prompt: string;
  systemPrompt: string | null;
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

/** Tells the instances (of `host`, when pinned) that a queued run waits; sent at commit. */
export async function ringForWork(db: Database, host: string | null): Promise<void> {
  await db.execute(sql`select pg_notify(${WORK_CHANNEL}, ${host ?? ""})`);
}

const claimedColumns = { run: getTableColumns(runs), resume: cliSessionStarted(runs.sessionId) };

/**
 * Who claims a run, and by which claim: `token`, new for each claim, is kept on the run, so that
 * a claim whose answer was lost can be given back (`releaseClaims`).
 */
export interface Claim {
  instanceId: string;
  token: string;
}

/**
 * Makes the claimer the owner of the queued run nobody owns, of those this host may run, whose turn
 * it is: of the key with the fewest runs running on all instances (runs without a key count as one
 * key), the oldest; ties between keys go to the oldest run. Runs another instance is claiming at
 * the same moment are skipped. Undefined when there is none. `resume`: whether the run resumes the
 * CLI's session.
 */
export async function claimQueuedRun(
  db: Database,
  claim: Claim,
  host: string,
): Promise<{ run: RunRow; resume: boolean } | undefined> {
  // Running, or queued and an instance's already (claimed, or admitted where it starts at once):
  // each holds a slot, or is about to. `in (…)` written out: the open runs' partial index.
  const running = db.$with("running_per_key").as(
    db
      .select({ keyId: sessions.ownerKeyId, n: count().as("n") })
      .from(runs)
      .innerJoin(sessions, eq(sessions.id, runs.sessionId))
      .where(
        and(
          sql`${runs.status} in ('queued', 'running')`,
          or(eq(runs.status, "running"), isNotNull(runs.instanceId)),
        ),
      )
      .groupBy(sessions.ownerKeyId),
  );
  const next = db
    .with(running)
    .select({ id: runs.id })
    .from(runs)
    .innerJoin(sessions, eq(sessions.id, runs.sessionId))
    .leftJoin(running, sql`${running.keyId} is not distinct from ${sessions.ownerKeyId}`)
    .where(
      and(
        eq(runs.status, "queued"),
        isNull(runs.instanceId),
        or(isNull(runs.pinnedHost), eq(runs.pinnedHost, host)),
      ),
    )
    .orderBy(sql`coalesce(${running.n}, 0)`, runs.createdAt, runs.id)
    .limit(1)
    .for("update", { of: runs, skipLocked: true });
  // `=` a scalar subquery, evaluated once: with `in (…)` the planner may run the LIMIT 1 subquery
  // once per row of runs, and one claim took every unowned queued run (seen in the chaos test).
  const rows = await db
    .update(runs)
    .set({ instanceId: claim.instanceId, claimToken: claim.token })
    .where(and(eq(runs.id, sql`(${next})`), isNull(runs.instanceId), eq(runs.status, "queued")))
    .returning(claimedColumns);
  return rows[0];
}

/**
 * Makes the claimer the owner of this run (to cancel it), if it is still queued and nobody's, or
 * still the claimer's instance's by its claim `failed` (whose answer was lost, say).
 */
export async function claimRun(
  db: Database,
  id: string,
  claim: Claim,
  failed: string | null = null,
): Promise<{ run: RunRow; resume: boolean } | undefined> {
  const unowned = isNull(runs.instanceId);
  const [row] = await db
    .update(runs)
    .set({ instanceId: claim.instanceId, claimToken: claim.token })
    .where(
      and(
        eq(runs.id, id),
        eq(runs.status, "queued"),
        failed === null
          ? unowned
          : or(unowned, and(eq(runs.instanceId, claim.instanceId), eq(runs.claimToken, failed))),
      ),
    )
    .returning(claimedColumns);
  return row;
}

/**
 * Makes the claimer the owner of the queued runs nobody owns that are pinned to a host where no
 * instance's lease holds (their worktree's host is gone): nobody else could ever claim them.
 */
export async function claimStrandedRuns(db: Database, claim: Claim): Promise<RunRow[]> {
  return db
    .update(runs)
    .set({ instanceId: claim.instanceId, claimToken: claim.token })
    .where(
      and(
        eq(runs.status, "queued"),
        isNull(runs.instanceId),
        isNotNull(runs.pinnedHost),
        sql`not exists (select 1 from ${instances} i where i.host = ${runs.pinnedHost}
          and i.reaped_at is null and i.lease_expires_at > now())`,
      ),
    )
    .returning();
}

/**
 * Gives a queued run of `instanceId` back for any instance to claim, with what its message set
 * for it; false when it is no longer queued there.
 */
export async function releaseRun(
  db: Database,
  id: string,
  instanceId: string,
  handover: unknown,
): Promise<boolean> {
  const released = await db
    .update(runs)
    .set({ instanceId: null, handover })
    .where(and(eq(runs.id, id), eq(runs.instanceId, instanceId), eq(runs.status, "queued")))
    .returning({ id: runs.id });
  return released.length > 0;
}

/**
 * Gives back, for any instance to claim, the runs that `instanceId`'s claims `tokens` made its
 * own and that are still queued there (never started, ended nor given back), with the handover
 * they had; those given back, with the claim that had them.
 */
export async function releaseClaims(
  db: Database,
  instanceId: string,
  tokens: string[],
): Promise<{ id: string; pinnedHost: string | null; claimToken: string | null }[]> {
  return db
    .update(runs)
    .set({ instanceId: null })
    .where(
      and(
        inArray(runs.claimToken, tokens),
        eq(runs.instanceId, instanceId),
        eq(runs.status, "queued"),
      ),
    )
    .returning({ id: runs.id, pinnedHost: runs.pinnedHost, claimToken: runs.claimToken });
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

export async function getRun(db: Database, id: string): Promise<RunRow | undefined> {
  const [row] = await db.select().from(runs).where(eq(runs.id, id));
  return row;
}

/** The run, when it exists and the caller may see its session. */
export async function getVisibleRun(
  db: Database,
  id: string,
  principal: Principal,
): Promise<RunRow | undefined> {
  const [row] = await db
    .select({ run: runs })
    .from(runs)
    .innerJoin(sessions, eq(sessions.id, runs.sessionId))
    .where(and(eq(runs.id, id), visibleTo(principal)));
  return row?.run;
}

/** Runs the caller may see, newest first (see paging.ts); of one session when `sessionId` is given. */
export async function listRuns(
  db: Database,
  principal: Principal,
  page: { limit: number; after?: PageKey; sessionId?: string },
): Promise<RunRow[]> {
  const rows = await db
    .select({ run: runs })
    .from(runs)
    .innerJoin(sessions, eq(sessions.id, runs.sessionId))
    .where(
      and(
        visibleTo(principal),
        page.sessionId === undefined ? undefined : eq(runs.sessionId, page.sessionId),
        olderThan(runs.createdAt, runs.id, page.after),
      ),
    )
    .orderBy(...newestFirst(runs.createdAt, runs.id))
    .limit(page.limit);
  return rows.map((row) => row.run);
}

/** The active (queued or running) run of each of the sessions that has one. */
export async function activeRunIds(
  db: Database,
  sessionIds: string[],
): Promise<Map<string, string>> {
  if (sessionIds.length === 0) return new Map();
  const rows = await db
    .select({ sessionId: runs.sessionId, id: runs.id })
    .from(runs)
    .where(and(inArray(runs.sessionId, sessionIds), inArray(runs.status, [...ACTIVE_STATUSES])));
  return new Map(rows.map((row) => [row.sessionId, row.id]));
}

export async function getActiveRun(db: Database, sessionId: string): Promise<RunRow | undefined> {
  const [row] = await db
    .select()
    .from(runs)
    .where(and(eq(runs.sessionId, sessionId), inArray(runs.status, [...ACTIVE_STATUSES])));
  return row;
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

/**
 * Whether an earlier run of the session was started, so that the CLI may hold its session and the
 * next run resumes it. Not whether a CLI session id was recorded: the CLI keeps a conversation
 * from before its first line reaches the bridge (a run cancelled or killed early, or whose server
 * died, has none recorded), and when there is none to resume, the runner starts it instead
 * (claude/resume.ts). Asked when no other run of the session can be active: at admission, or when
 * a waiting run takes its turn.
 */
function cliSessionStarted(sessionId: AnyPgColumn | string) {
  const earlier = alias(runs, "earlier");
  return sql<boolean>`exists (${new QueryBuilder()
    .select({ id: earlier.id })
    .from(earlier)
    .where(and(eq(earlier.sessionId, sessionId), isNotNull(earlier.startedAt)))})`;
}

/**
 * What admitting a message to the session depends on, read in one statement: whether the session
 * has expired (the sweep may have done so since the route read it), its active run if any, and
 * whether its run will resume the CLI's session.
 */
export async function admissionState(
  db: Database,
  sessionId: string,
): Promise<{ expired: boolean; activeRunId: string | null; resume: boolean } | undefined> {
  const [row] = await db
    .select({
      expired: sql<boolean>`${sessions.expiredAt} is not null`,
      activeRunId: sql<string | null>`(${db
        .select({ id: runs.id })
        .from(runs)
        .where(and(eq(runs.sessionId, sessionId), inArray(runs.status, [...ACTIVE_STATUSES])))
        .limit(1)})`,
      resume: cliSessionStarted(sessionId),
    })
    .from(sessions)
    .where(eq(sessions.id, sessionId));
  return row;
}

/**
 * What a retry of `runId` needs of its session: the session's newest run (a retry must be of
 * it), and the last message a run before `runId` confirmed (`last_message_uuid`), where the retry
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

export async function markRunning(db: Database, id: string, startedAt: Date) {
  await db.update(runs).set({ status: "running", startedAt }).where(eq(runs.id, id));
}

export async function setRunPgid(db: Database, id: string, pgid: number, bootId: string | null) {
  await db.update(runs).set({ pgid, pgidBootId: bootId }).where(eq(runs.id, id));
}

/**
 * Records the agent's own session (thread) id as soon as its CLI reports it, on the run and its
 * session, so that a run that never gets its completion stored (its server died) can be resumed.
 */
export async function setAgentSessionId(
  db: Database,
  run: { id: string; sessionId: string },
  agentSessionId: string,
) {
  const id = cliId(agentSessionId);
  if (id === null) return;
  await db.update(runs).set({ agentSessionId: id }).where(eq(runs.id, run.id));
  await db.update(sessions).set({ agentSessionId: id }).where(eq(sessions.id, run.sessionId));
}

/**
 * The runs an instance (null: a version before instances) left queued, running or waiting; not
 * the queued runs left for any instance to claim (those have a handover).
 */
export async function unfinishedRuns(db: Database, instanceId: string | null): Promise<RunRow[]> {
  return db
    .select()
    .from(runs)
    .where(
      and(
        instanceId === null
          ? and(isNull(runs.instanceId), isNull(runs.handover))
          : eq(runs.instanceId, instanceId),
        inArray(runs.status, [...OPEN_STATUSES]),
      ),
    );
}

/** The session's runs that have no completion yet, whichever instance executes them. */
export async function openRunsOf(db: Database, sessionId: string): Promise<RunRow[]> {
  return db
    .select()
    .from(runs)
    .where(and(eq(runs.sessionId, sessionId), inArray(runs.status, [...OPEN_STATUSES])));
}

/**
 * Moves a waiting run into the queue, saying whether it resumes the CLI's session; throws a unique
 * violation while the session still has an active run, and returns undefined when the run is gone.
 */
export async function promoteWaitingRun(
  db: Database,
  id: string,
): Promise<{ run: RunRow; resume: boolean } | undefined> {
  const [row] = await db
    .update(runs)
    .set({ status: "queued" })
    .where(and(eq(runs.id, id), eq(runs.status, "waiting")))
    .returning({ run: getTableColumns(runs), resume: cliSessionStarted(runs.sessionId) });
  return row;
}

/**
 * How a run ended, as its row keeps it. Its text (result, error) is not copied here: the run's
 * completion event in its log holds it losslessly, as JSON, whatever characters it has, where a
 * Postgres text column cannot even hold U+0000.
 */
export interface RunOutcome {
  status: string;
  usage: Usage;
  costUsd: number | null;
  durationMs: number | null;
  agentSessionId: string | null;
  lastMessageUuid: string | null;
  exitCode: number | null;
}

/** An id the CLI reported, kept only when it looks like one (printable ASCII, bounded). */
const cliId = (id: string | null) => (id && /^[\x21-\x7e]{1,200}$/.test(id) ? id : null);

/**
 * Records how a run ended and adds its usage to its session's totals, and its cost to its key's
 * spend this month, in one SQL statement each (no read-modify-write), returning the session's
 * new totals. Call inside the transaction that also
 * appends the run's completion event.
 */
/** The run was closed already (by the instance that reaped its owner), or deleted. */
export class RunAlreadyClosedError extends Error {
  constructor(readonly runId: string) {
    super(`run ${runId} is closed already, or gone`);
  }
}

/**
 * Records the run's outcome and adds its usage to its session, once: throws RunAlreadyClosedError
 * when the run is no longer open, so that it never gets a second completion.
 */
export async function finishRun(db: Database, run: RunRow, outcome: RunOutcome) {
  const now = new Date();
  const { usage } = outcome;
  const closed = await db
    .update(runs)
    .set({
      status: outcome.status,
      finishedAt: now,
      exitCode: outcome.exitCode,
      inputTokens: usage.input_tokens,
      outputTokens: usage.output_tokens,
      cacheReadTokens: usage.cache_read_tokens,
      cacheCreationTokens: usage.cache_creation_tokens,
      numTurns: usage.num_turns,
      durationApiMs: usage.duration_api_ms,
      costUsd: outcome.costUsd,
      durationMs: outcome.durationMs,
      agentSessionId: cliId(outcome.agentSessionId),
      lastMessageUuid: cliId(outcome.lastMessageUuid),
      pgid: null,
      pgidBootId: null,
      // The message's images are not needed once the run is over.
      handover: null,
    })
    .where(and(eq(runs.id, run.id), inArray(runs.status, [...ACTIVE_STATUSES, "waiting"])))
    .returning({ id: runs.id });
  if (closed.length === 0) throw new RunAlreadyClosedError(run.id);
  const [updated] = await db
    .update(sessions)
    .set({
      inputTokens: sql`${sessions.inputTokens} + ${usage.input_tokens}`,
      outputTokens: sql`${sessions.outputTokens} + ${usage.output_tokens}`,
      cacheReadTokens: sql`${sessions.cacheReadTokens} + ${usage.cache_read_tokens}`,
      cacheCreationTokens: sql`${sessions.cacheCreationTokens} + ${usage.cache_creation_tokens}`,
      // A session's cost is the sum of its runs' known costs, added as decimals (exactly).
      costUsd: sql`${sessions.costUsd} + ${String(outcome.costUsd ?? 0)}::numeric`,
      numTurns: sql`${sessions.numTurns} + ${usage.num_turns}`,
      runs: sql`${sessions.runs} + 1`,
      // A run that ended before its CLI said which session it was keeps the one known.
      agentSessionId: sql`coalesce(${cliId(outcome.agentSessionId)}, ${sessions.agentSessionId})`,
      lastActivityAt: now,
      updatedAt: now,
    })
    .where(eq(sessions.id, run.sessionId))
    .returning({ ...sessionUsageColumns, ownerKeyId: sessions.ownerKeyId });
  if (!updated) return undefined;
  const { ownerKeyId, ...totals } = updated;
  // A run whose calls the model gateway metered was charged for each as it was recorded (all
  // recorded before its end is: src/agents/gateway-access.ts); a run without any is charged what
  // its CLI reported (it called its API itself, or spent nothing).
  if (ownerKeyId && outcome.costUsd && !(await hasModelCalls(db, run.id))) {
    await addKeySpend(db, ownerKeyId, now, outcome.costUsd);
  }
  return totals;
}

/** Usage over the sessions the caller may see: its own, or all for an admin. */
export async function usageTotals(db: Database, principal: Principal) {
  const [row] = await db
    .select({
      input_tokens: sql`coalesce(sum(${sessions.inputTokens}), 0)`.mapWith(Number),
      output_tokens: sql`coalesce(sum(${sessions.outputTokens}), 0)`.mapWith(Number),
      cache_read_tokens: sql`coalesce(sum(${sessions.cacheReadTokens}), 0)`.mapWith(Number),
      cache_creation_tokens: sql`coalesce(sum(${sessions.cacheCreationTokens}), 0)`.mapWith(Number),
      cost_usd: sql`coalesce(sum(${sessions.costUsd}), 0)`.mapWith(Number),
      num_turns: sql`coalesce(sum(${sessions.numTurns}), 0)`.mapWith(Number),
      runs: sql`coalesce(sum(${sessions.runs}), 0)`.mapWith(Number),
      sessions: sql`count(*)`.mapWith(Number),
    })
    .from(sessions)
    .where(visibleTo(principal));
  if (!row) throw new Error("usage query returned no row");
  return row;
}
