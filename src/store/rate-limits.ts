import { eq, sql } from "drizzle-orm";
import type { Database } from "./db.js";
import { preparedFor } from "./prepared.js";
import { rateBuckets } from "./schema.js";

// The per-key request allowance as one row per key, so that every instance on the database counts
// against the same bucket. Taking a token is one statement: insert a full bucket, or refill the
// existing one for the time since its last use and take one if that leaves at least one.

/** The bucket's tokens now: what it had, and what the time since its last use adds, up to full. */
const refill = (perMinute: unknown, perSecond: unknown) =>
  sql`least(${perMinute}::float8, ${rateBuckets.tokens} + extract(epoch from now() - ${rateBuckets.updatedAt})::float8 * ${perSecond}::float8)`;

/** Every request takes a token: its statement is built once. */
const take = preparedFor((db) => {
  const refilled = refill(sql.placeholder("perMinute"), sql.placeholder("perSecond"));
  return db
    .insert(rateBuckets)
    .values({
      bucket: sql.placeholder("bucket"),
      tokens: sql.placeholder("full"),
      updatedAt: sql`now()`,
    })
    .onConflictDoUpdate({
      target: rateBuckets.bucket,
      set: { tokens: sql`${refilled} - 1`, updatedAt: sql`now()` },
      setWhere: sql`${refilled} >= 1`,
    })
    .returning({ tokens: rateBuckets.tokens })
    .prepare("take_token");
});

/**
 * Takes a request token from `bucket` (`perMinute` a minute, bursts up to as many); 0 when it was
 * there, else the seconds until one will be.
 */
export async function takeToken(db: Database, bucket: string, perMinute: number): Promise<number> {
  const perSecond = perMinute / 60;
  const taken = await take(db).execute({ bucket, perMinute, perSecond, full: perMinute - 1 });
  if (taken.length > 0) return 0;
  const refilled = refill(perMinute, perSecond);
  const [row] = await db
    .select({ missing: sql<number>`1 - ${refilled}` })
    .from(rateBuckets)
    .where(eq(rateBuckets.bucket, bucket));
  return Math.max(1, Math.ceil(Number(row?.missing ?? 1) / perSecond));
}
