import { eq, type Query, sql } from "drizzle-orm";
import type { SessionUsage } from "../completion-event.js";
import type { Usage } from "../events.js";
import { type Database, executePrepared, returnedRows, rowOf, statementOnce } from "./db.js";
import { storedInFeed } from "./feed.js";
import { monthOf } from "./keys.js";
import { preparedFor } from "./prepared.js";
import { cliId, OPEN_STATUSES_LIST } from "./runs.js";
import { keySpend, modelCalls, type RunRow, runs, sessions } from "./schema.js";
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
 * spend this month, in one SQL statement (no read-modify-write); returns the session's new totals.
 * Once: throws RunAlreadyClosedError when the run is no longer open, so that it never gets a
 * second completion. Call inside the transaction that also appends the run's completion event.
 *
 * The run's row keeps what its CLI reported (as its completion does); its session's totals add what
 * the model gateway metered of its calls, when any went through it: a CLI's report is a line on its
 * output, which an agent running commands can forge, and a killed CLI reports nothing.
 */
export async function finishRun(
  db: Database,
  run: RunRow,
  outcome: RunOutcome,
): Promise<SessionUsage | undefined> {
  return closedRun(run, await executePrepared(db, runClosed(run, outcome)));
}

/** finishRun's statement. */
export function runClosed(run: RunRow, outcome: RunOutcome): Query {
  const now = new Date();
  const { usage, costUsd } = outcome;
  return closing({
    id: run.id,
    sessionId: run.sessionId,
    status: outcome.status,
    now: now.toISOString(),
    month: monthOf(now).toISOString(),
    exitCode: outcome.exitCode,
    inputTokens: usage.input_tokens,
    outputTokens: usage.output_tokens,
    cacheReadTokens: usage.cache_read_tokens,
    cacheCreationTokens: usage.cache_creation_tokens,
    numTurns: usage.num_turns,
    durationApiMs: usage.duration_api_ms,
    // Added as decimals (exactly), as every cost.
    costUsd: costUsd === null ? null : String(costUsd),
    durationMs: outcome.durationMs,
    agentSessionId: cliId(outcome.agentSessionId),
    lastMessageUuid: cliId(outcome.lastMessageUuid),
  });
}

/** What finishRun's statement answered: the session's new totals; throws when the run was closed. */
export function closedRun(run: RunRow, answer: unknown): SessionUsage | undefined {
  const [row] = returnedRows<Record<string, unknown>>(answer);
  if (!Number(row?.closed)) throw new RunAlreadyClosedError(run.id);
  if (row?.runs === null || row?.runs === undefined) return undefined;
  return rowOf(sessionUsageColumns, row) as SessionUsage;
}

/**
 * The run closed (while open), its process group and its message's images (`handover`) cleared,
 * not needed once it is over; its metered calls read; its session's totals added what they
 * metered (meteredSpend's rule: the calls' tokens when there were any, their cost when every one
 * was priced, else what the CLI reported); its key charged the CLI's cost when no call was metered
 * (a metered call was charged as it was recorded: src/agents/gateway-access.ts). A run that ended
 * before its CLI said which session it was leaves its session the one known.
 */
const closing = statementOnce(() => {
  const p = (name: string, type: string) => sql`${sql.placeholder(name)}::${sql.raw(type)}`;
  const reported = (name: string) => p(name, "bigint");
  return sql`
    with closing as (
      update ${runs} set status = ${p("status", "text")}, finished_at = ${p("now", "timestamptz")},
        exit_code = ${p("exitCode", "integer")}, input_tokens = ${reported("inputTokens")},
        output_tokens = ${reported("outputTokens")}, cache_read_tokens = ${reported("cacheReadTokens")},
        cache_creation_tokens = ${reported("cacheCreationTokens")},
        num_turns = ${p("numTurns", "integer")}, duration_api_ms = ${p("durationApiMs", "integer")},
        cost_usd = ${p("costUsd", "numeric")}, duration_ms = ${p("durationMs", "integer")},
        agent_session_id = ${p("agentSessionId", "text")},
        last_message_uuid = ${p("lastMessageUuid", "text")},
        pgid = null, pgid_boot_id = null, handover = null
      where id = ${p("id", "uuid")} and status in ${OPEN_STATUSES_LIST}
      returning id),
    metered as (
      select count(*) as calls, count(cost_usd) as priced,
        coalesce(sum(input_tokens), 0) as input_tokens,
        coalesce(sum(output_tokens), 0) as output_tokens,
        coalesce(sum(cache_read_tokens), 0) as cache_read_tokens,
        coalesce(sum(cache_creation_tokens), 0) as cache_creation_tokens,
        coalesce(sum(cost_usd), 0) as cost_usd
      from ${modelCalls} where run_id = ${p("id", "uuid")}),
    spent as (
      select m.calls,
        case when m.calls = 0 then ${reported("inputTokens")} else m.input_tokens end as input_tokens,
        case when m.calls = 0 then ${reported("outputTokens")} else m.output_tokens end as output_tokens,
        case when m.calls = 0 then ${reported("cacheReadTokens")} else m.cache_read_tokens end
          as cache_read_tokens,
        case when m.calls = 0 then ${reported("cacheCreationTokens")} else m.cache_creation_tokens end
          as cache_creation_tokens,
        case when m.calls > 0 and m.priced = m.calls then m.cost_usd
          else ${p("costUsd", "numeric")} end as cost_usd
      from metered m where exists (select 1 from closing)),
    updating as (
      update ${sessions} s set input_tokens = s.input_tokens + sp.input_tokens,
        output_tokens = s.output_tokens + sp.output_tokens,
        cache_read_tokens = s.cache_read_tokens + sp.cache_read_tokens,
        cache_creation_tokens = s.cache_creation_tokens + sp.cache_creation_tokens,
        cost_usd = s.cost_usd + coalesce(sp.cost_usd, 0),
        num_turns = s.num_turns + ${p("numTurns", "integer")}, runs = s.runs + 1,
        agent_session_id = coalesce(${p("agentSessionId", "text")}, s.agent_session_id),
        last_activity_at = ${p("now", "timestamptz")}, updated_at = ${p("now", "timestamptz")}
      from spent sp where s.id = ${p("sessionId", "uuid")}
      returning s.input_tokens, s.output_tokens, s.cache_read_tokens, s.cache_creation_tokens,
        s.cost_usd, s.num_turns, s.runs, s.owner_key_id, sp.calls),
    charged as (
      insert into ${keySpend} (key_id, period_start, cost_usd)
      select u.owner_key_id, ${p("month", "timestamptz")}, ${p("costUsd", "numeric")} from updating u
      where u.owner_key_id is not null and u.calls = 0 and ${p("costUsd", "numeric")} <> 0
      on conflict (key_id, period_start) do update
        set cost_usd = ${keySpend}.cost_usd + excluded.cost_usd)
    select (select count(*) from closing) as closed, u.*
    from (select 1) as one left join updating u on true`;
});
