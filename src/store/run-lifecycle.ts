import { and, eq, inArray, sql } from "drizzle-orm";
import type { Usage } from "../events.js";
import { type Database, executePrepared } from "./db.js";
import { storedInFeed } from "./feed.js";
import { addingKeySpend } from "./keys.js";
import { meteredColumns, meteredSpend } from "./model-calls.js";
import { preparedFor } from "./prepared.js";
import { ACTIVE_STATUSES, cliId } from "./runs.js";
import { modelCalls, type RunRow, runs, sessions } from "./schema.js";
import { sessionUsageColumns } from "./sessions.js";

// A run's row as its execution goes: running, its process group, and its outcome at the end, once
// (with its usage added to its session and its cost to its key's spend). The agent's session id
// is recorded with the events that name it (appendEvents, events.ts).

/**
 * Marks the run running, with its `run_started` in the feed: one statement, not a transaction of
 * two, for it is made as the run's CLI starts, and on the embedded database every statement holds
 * the server's thread. A run closed meanwhile (another instance found this one gone) stays closed:
 * reopened, it would take a second completion.
 */
export async function markRunning(db: Database, id: string, startedAt: Date) {
  const at = startedAt.toISOString();
  await executePrepared(
    db,
    sql`
    with started as (
      update ${runs} set status = 'running', started_at = ${at}::timestamptz
      where id = ${id}::uuid and status in ('queued', 'waiting')
      returning session_id),
    ${storedInFeed(sql`select 'run_started', s.owner_key_id, s.id, ${id}::uuid, '{}', ${at}::timestamptz
      from started join ${sessions} s on s.id = started.session_id`)}`,
  );
}

const pgidOf = preparedFor((db) =>
  db
    .update(runs)
    // Update values take a placeholder only within SQL.
    .set({ pgid: sql`${sql.placeholder("pgid")}`, pgidBootId: sql`${sql.placeholder("bootId")}` })
    .where(eq(runs.id, sql.placeholder("id")))
    .prepare("set_run_pgid"),
);

export async function setRunPgid(db: Database, id: string, pgid: number, bootId: string | null) {
  await pgidOf(db).execute({ id, pgid, bootId });
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

/** The run was closed already (by the instance that reaped its owner), or deleted. */
export class RunAlreadyClosedError extends Error {
  constructor(readonly runId: string) {
    super(`run ${runId} is closed already, or gone`);
  }
}

/**
 * Records how a run ended and adds its usage to its session's totals, and its cost to its key's
 * spend this month, in two SQL statements (no read-modify-write): the run's close with the read of
 * its metered calls, then its session's totals with its key's spend; returns the session's new
 * totals. Once: throws RunAlreadyClosedError when the run is no longer open, so that it never gets
 * a second completion. Call inside the transaction that also appends the run's completion event.
 *
 * The run's row keeps what its CLI reported (as its completion does); its session's totals add what
 * the model gateway metered of its calls, when any went through it: a CLI's report is a line on its
 * output, which an agent running commands can forge, and a killed CLI reports nothing.
 */
export async function finishRun(db: Database, run: RunRow, outcome: RunOutcome) {
  const now = new Date();
  const { usage } = outcome;
  // The run closed and its metered calls read, in one statement.
  const closing = db.$with("closing").as(
    db
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
      .returning({ id: runs.id }),
  );
  const [closed] = await db
    .with(closing)
    .select({ ...meteredColumns, runs: sql`(select count(*) from ${closing})`.mapWith(Number) })
    .from(modelCalls)
    .where(eq(modelCalls.runId, run.id))
    .prepare("close_run")
    .execute();
  if (!closed?.runs) throw new RunAlreadyClosedError(run.id);
  const spent = meteredSpend(usage, outcome.costUsd, closed);
  // The session's totals, and the key's spend with them when it is the CLI's report.
  const updating = db.$with("updating").as(
    db
      .update(sessions)
      .set({
        inputTokens: sql`${sessions.inputTokens} + ${spent.usage.input_tokens}`,
        outputTokens: sql`${sessions.outputTokens} + ${spent.usage.output_tokens}`,
        cacheReadTokens: sql`${sessions.cacheReadTokens} + ${spent.usage.cache_read_tokens}`,
        cacheCreationTokens: sql`${sessions.cacheCreationTokens} + ${spent.usage.cache_creation_tokens}`,
        // A session's cost is the sum of its runs' known costs, added as decimals (exactly).
        costUsd: sql`${sessions.costUsd} + ${String(spent.costUsd ?? 0)}::numeric`,
        numTurns: sql`${sessions.numTurns} + ${usage.num_turns}`,
        runs: sql`${sessions.runs} + 1`,
        // A run that ended before its CLI said which session it was keeps the one known.
        agentSessionId: sql`coalesce(${cliId(outcome.agentSessionId)}, ${sessions.agentSessionId})`,
        lastActivityAt: now,
        updatedAt: now,
      })
      .where(eq(sessions.id, run.sessionId))
      .returning({ ...sessionUsageColumns, ownerKeyId: sessions.ownerKeyId }),
  );
  // A run whose calls the model gateway metered was charged for each as it was recorded (all
  // recorded before its end is: src/agents/gateway-access.ts); a run without any is charged what
  // its CLI reported (it called its API itself, or spent nothing).
  const charged =
    outcome.costUsd && closed.calls === 0
      ? [addingKeySpend(db, updating, now, outcome.costUsd)]
      : [];
  const [updated] = await db
    .with(updating, ...charged)
    .select()
    .from(updating)
    .prepare("add_run_to_session")
    .execute();
  if (!updated) return undefined;
  const { ownerKeyId: _, ...totals } = updated;
  return totals;
}
