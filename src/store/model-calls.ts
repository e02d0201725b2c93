import { randomUUID } from "node:crypto";
import { type AnyColumn, asc, count, eq, sql } from "drizzle-orm";
import type { Database } from "./db.js";
import { type ModelCallRow, modelCalls } from "./schema.js";

// The metered calls of runs to the model APIs (src/gateway/), one row a call, and what a run's
// calls add up to.

export type NewModelCall = Omit<ModelCallRow, "id">;

export async function insertModelCall(db: Database, call: NewModelCall): Promise<void> {
  await db.insert(modelCalls).values({ id: randomUUID(), ...call });
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
}

/** A sum of a bigint column, 0 over no rows; numeric in SQL, read as a number (far below 2^53). */
const total = (column: AnyColumn) => sql`coalesce(sum(${column}), 0)`.mapWith(Number);

export async function meteredUsage(db: Database, runId: string): Promise<MeteredUsage> {
  const [row] = await db
    .select({
      calls: count(),
      inputTokens: total(modelCalls.inputTokens),
      outputTokens: total(modelCalls.outputTokens),
      cacheReadTokens: total(modelCalls.cacheReadTokens),
      cacheCreationTokens: total(modelCalls.cacheCreationTokens),
    })
    .from(modelCalls)
    .where(eq(modelCalls.runId, runId));
  // An aggregate without group by always has its one row.
  return row as MeteredUsage;
}
