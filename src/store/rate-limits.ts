import { and, eq, isNull, sql } from "drizzle-orm";
import type { Database } from "./db.js";
import { preparedFor } from "./prepared.js";
import { type ApiKeyRow, apiKeys, rateBuckets } from "./schema.js";

// The per-key request allowance as one row per key, so that every instance on the database counts
// against the same bucket. Taking a token is one statement: insert a full bucket, or refill the
// existing one for the time since its last use and take one if that leaves at least one.
//
// A count is the one write most requests make, and losing the last few in a crash of the database
// costs nothing but a few requests uncounted: a statement that takes a token commits without
// waiting for the write-ahead log to reach the disk (synchronous_commit off for its own
// transaction, set by the statement itself). That wait was about half of the statement's time on
// Postgres (bench/results/HISTORY.md). Only ever run on its own, never inside a transaction that
// writes anything else: the setting holds for the whole transaction.

/** The bucket's tokens now: what it had, and what the time since its last use adds, up to full. */
const refill = (perMinute: unknown, perSecond: unknown) =>
  sql`least(${perMinute}::float8, ${rateBuckets.tokens} + extract(epoch from now() - ${rateBuckets.updatedAt})::float8 * ${perSecond}::float8)`;

/**
 * Evaluated in a written row's `returning` list: its transaction commits without waiting for the
 * log's flush (see above). The setting is local to the transaction, so the connection goes back to
 * the pool as it was.
 */
const relaxedCommit = sql<string>`set_config('synchronous_commit', 'off', true)`;

/** A token taken from a bucket that has one; a new bucket starts full, less the one taken. */
const takingToken = () => {
  const refilled = refill(sql.placeholder("perMinute"), sql.placeholder("perSecond"));
  return {
    target: rateBuckets.bucket,
    set: { tokens: sql`${refilled} - 1`, updatedAt: sql`now()` },
    setWhere: sql`${refilled} >= 1`,
  };
};

/** Every request takes a token: its statement is built once. */
const take = preparedFor((db) =>
  db
    .insert(rateBuckets)
    .values({
      bucket: sql.placeholder("bucket"),
      tokens: sql.placeholder("full"),
      updatedAt: sql`now()`,
    })
    .onConflictDoUpdate(takingToken())
    .returning({ tokens: rateBuckets.tokens, relaxed: relaxedCommit })
    .prepare("take_token"),
);

/** The placeholders' values of a statement taking a token at `perMinute`. */
const rates = (perMinute: number) => ({
  perMinute,
  perSecond: perMinute / 60,
  full: perMinute - 1,
});

/**
 * Takes a request token from `bucket` (`perMinute` a minute, bursts up to as many); 0 when it was
 * there, else the seconds until one will be.
 */
export async function takeToken(db: Database, bucket: string, perMinute: number): Promise<number> {
  const taken = await take(db).execute({ bucket, ...rates(perMinute) });
  return taken.length > 0 ? 0 : tokenWait(db, bucket, perMinute);
}

/** The key's request takes a token from the key's bucket (its id), if the key is not revoked. */
const keyAndToken = preparedFor((db) => {
  const hash = eq(apiKeys.hash, sql.placeholder("hash"));
  const taken = db.$with("taken").as(
    db
      .insert(rateBuckets)
      .select(
        db
          .select({
            bucket: sql`${apiKeys.id}::text`.as("bucket"),
            tokens: sql`${sql.placeholder("full")}::float8`.as("tokens"),
            updatedAt: sql`now()`.as("updated_at"),
          })
          .from(apiKeys)
          .where(and(hash, isNull(apiKeys.revokedAt))),
      )
      .onConflictDoUpdate(takingToken())
      .returning({ tokens: rateBuckets.tokens, relaxed: relaxedCommit }),
  );
  return db
    .with(taken)
    .select({ key: apiKeys, taken: sql<boolean>`exists (select 1 from ${taken})` })
    .from(apiKeys)
    .where(hash)
    .prepare("key_and_token");
});

/**
 * The key whose hash is `hash`, read in the statement that takes its request's token from its
 * bucket (`perMinute` a minute, as takeToken) when the key is not revoked: a request with a key
 * costs one round trip before its own work, not two. `taken` false: its bucket had no token (see
 * tokenWait). Undefined for a hash no key has.
 */
export async function keyTakingToken(
  db: Database,
  hash: string,
  perMinute: number,
): Promise<{ key: ApiKeyRow; taken: boolean } | undefined> {
  const [row] = await keyAndToken(db).execute({ hash, ...rates(perMinute) });
  return row;
}

/** The seconds until `bucket` has a token again (at least 1). */
export async function tokenWait(db: Database, bucket: string, perMinute: number): Promise<number> {
  const perSecond = perMinute / 60;
  const refilled = refill(perMinute, perSecond);
  const [row] = await db
    .select({ missing: sql<number>`1 - ${refilled}` })
    .from(rateBuckets)
    .where(eq(rateBuckets.bucket, bucket));
  return Math.max(1, Math.ceil(Number(row?.missing ?? 1) / perSecond));
}
