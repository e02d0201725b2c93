import { sql } from "drizzle-orm";
import type { Principal } from "../principal.js";
import type { Database } from "./db.js";
import { sessions } from "./schema.js";
import { visibleTo } from "./sessions.js";

// The usage report (GET /v1/usage): the sessions' running totals, summed.

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
