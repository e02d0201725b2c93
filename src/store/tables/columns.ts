import { bigint, customType, integer, numeric, timestamp } from "drizzle-orm/pg-core";
import { COST_DECIMALS } from "../../money.js";

// Column types the tables share.

// Timestamps are written from JS (millisecond precision) rather than defaultNow(), so that a
// value read back compares equal to the one used in a paging cursor.
export const ts = (name: string) => timestamp(name, { withTimezone: true, mode: "date" });
export const bytea = customType<{ data: Buffer; driverData: Uint8Array }>({
  dataType: () => "bytea",
  // postgres.js hands back a Buffer, PGlite a Uint8Array.
  fromDriver: (value) => Buffer.from(value),
});
export const tokens = (name: string) => bigint(name, { mode: "number" }).notNull().default(0);
/**
 * An amount of USD: a decimal to COST_DECIMALS places, so that the sums SQL makes of it (a
 * session's, a key's month, /v1/usage) are exact, where doubles drifted (0.1 + 0.2). Read as a JS
 * number, which holds such an amount exactly up to about $100 000.
 */
export const usd = (name: string) =>
  numeric(name, { precision: 10 + COST_DECIMALS, scale: COST_DECIMALS, mode: "number" });

/** Token and cost totals; a session adds up its runs' usage here. */
export const usageColumns = () => ({
  inputTokens: tokens("input_tokens"),
  outputTokens: tokens("output_tokens"),
  cacheReadTokens: tokens("cache_read_tokens"),
  cacheCreationTokens: tokens("cache_creation_tokens"),
  costUsd: usd("cost_usd").notNull().default(0),
  numTurns: integer("num_turns").notNull().default(0),
});
