import { type AnyColumn, asc, count, eq, inArray, sql } from "drizzle-orm";
import type { Usage } from "../events.js";
import type { Database } from "./db.js";
import { addKeySpend, keyOfRun } from "./keys.js";
import { type ModelCallRow, modelCalls } from "./schema.js";

// The metered calls of runs to the model APIs (src/gateway/), one row a call, and what a run's
// calls add up to.

/**
 * Records the call and adds its cost to the spend of its run's key in the month it ended, together:
 * a key's spend is its metered calls', whatever becomes of their runs (killed, crashed, lying).
 * Once per call id: a record tried again after a commit whose answer was lost changes nothing.
 */
export async function recordModelCall(db: Database, call: ModelCallRow, at = new Date()) {
  await db.transaction(async (tx) => {
    const inserted = await tx
      .insert(modelCalls)
      .values(call)
      .onConflictDoNothing()
      .returning({ id: modelCalls.id });
    if (inserted.length === 0 || !call.costUsd) return;
    const keyId = await keyOfRun(tx, call.runId);
    if (keyId) await addKeySpend(tx, keyId, at, call.costUsd);
  });
}

/** A run's calls, in the order they started. */
export function listModelCalls(db: Database, runId: string): Promise<ModelCallRow[]> {
  return db
    .select()
    .from(modelCalls)
    .where(eq(modelCalls.runId, runId))
    .orderBy(asc(modelCalls.startedAt), asc(modelCalls.id));
}

/** What a run's calls used, by the APIs' own account. */
export interface MeteredUsage {
  calls: number;
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheCreationTokens: number;
  /** What its calls of priced models cost, in USD. */
  costUsd: number;
  /** Its calls of priced models: all of them, when `costUsd` is the whole cost. */
  pricedCalls: number;
}

/**
 * `usage` with its tokens as the run's calls were metered and its cost theirs when every call's
 * model had a price (else `costUsd`, what the CLI said); as given when no call was metered.
 */
export function meteredSpend(
  usage: Usage,
  costUsd: number | null,
  metered: MeteredUsage,
): { usage: Usage; costUsd: number | null } {
  if (metered.calls === 0) return { usage, costUsd };
  return {
    usage: {
      ...usage,
      input_tokens: metered.inputTokens,
      output_tokens: metered.outputTokens,
      cache_read_tokens: metered.cacheReadTokens,
      cache_creation_tokens: metered.cacheCreationTokens,
    },
    costUsd: metered.pricedCalls === metered.calls ? metered.costUsd : costUsd,
  };
}

/**
 * A sum of a bigint or numeric column, 0 over no rows; numeric in SQL, read as a number (tokens far
 * below 2^53; USD exact to 10 decimal places up to about $100 000, as every cost).
 */
const total = (column: AnyColumn) => sql`coalesce(sum(${column}), 0)`.mapWith(Number);

/** The columns of a run's MeteredUsage, over its rows of model_calls. */
const meteredColumns = {
  calls: count(),
  inputTokens: total(modelCalls.inputTokens),
  outputTokens: total(modelCalls.outputTokens),
  cacheReadTokens: total(modelCalls.cacheReadTokens),
  cacheCreationTokens: total(modelCalls.cacheCreationTokens),
  costUsd: total(modelCalls.costUsd),
  pricedCalls: count(modelCalls.costUsd),
};

export async function meteredUsage(db: Database, runId: string): Promise<MeteredUsage> {
  const [row] = await db.select(meteredColumns).from(modelCalls).where(eq(modelCalls.runId, runId));
  // An aggregate without group by always has its one row.
  return row as MeteredUsage;
}

/** What each of the runs' calls used, for those of them with any. */
export async function meteredUsageOf(
  db: Database,
  runIds: string[],
): Promise<Map<string, MeteredUsage>> {
  if (runIds.length === 0) return new Map();
  const rows = await db
    .select({ runId: modelCalls.runId, ...meteredColumns })
    .from(modelCalls)
    .where(inArray(modelCalls.runId, runIds))
    .groupBy(modelCalls.runId);
  return new Map(rows.map(({ runId, ...usage }) => [runId, usage]));
}
