import { and, count, eq, getTableColumns, inArray, isNotNull, isNull, or, sql } from "drizzle-orm";
import type { Database } from "./db.js";
import { preparedFor } from "./prepared.js";
import { cliSessionStarted } from "./runs.js";
import { instances, type RunRow, runs, sessions } from "./schema.js";

// Queued runs and the instances that execute them: telling the instances that one waits, an
// instance claiming one (the next in fair order, a given one, those stranded on a gone host), and
// giving one back for any instance to claim.

/**
 * The channel on which instances are told that a queued run waits to be claimed (src/cluster/
 * claims.ts); the payload is the host it is pinned to, or empty.
 */
export const WORK_CHANNEL = "agent_bridge_work";

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

/** Its SQL built once: every run's end on the Postgres server asks it (RunQueue.pull). */
const claimNextQueued = preparedFor((db) => {
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
        or(isNull(runs.pinnedHost), eq(runs.pinnedHost, sql.placeholder("host"))),
      ),
    )
    .orderBy(sql`coalesce(${running.n}, 0)`, runs.createdAt, runs.id)
    .limit(1)
    .for("update", { of: runs, skipLocked: true });
  // `=` a scalar subquery, evaluated once: with `in (…)` the planner may run the LIMIT 1 subquery
  // once per row of runs, and one claim took every unowned queued run (seen in the chaos test).
  return db
    .update(runs)
    .set({
      // Update values take a placeholder only within SQL.
      instanceId: sql`${sql.placeholder("instanceId")}`,
      claimToken: sql`${sql.placeholder("token")}`,
    })
    .where(and(eq(runs.id, sql`(${next})`), isNull(runs.instanceId), eq(runs.status, "queued")))
    .returning(claimedColumns)
    .prepare("claim_queued_run");
});

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
  const [row] = await claimNextQueued(db).execute({ ...claim, host });
  return row;
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
