import { randomUUID } from "node:crypto";
import { and, asc, count, eq, isNull, lt, or, sql } from "drizzle-orm";
import type { Database } from "./db.js";
import { preparedFor } from "./prepared.js";
import { type ApiKeyRow, apiKeys, keySpend, runs, sessions } from "./schema.js";

/** The policy columns of a key (src/auth/policy.ts); an absent one keeps its default. */
export type KeyPolicyColumns = Partial<
  Pick<
    ApiKeyRow,
    | "permissionModes"
    | "workRoots"
    | "maxBudgetUsd"
    | "worktrees"
    | "egress"
    | "models"
    | "toolRules"
  >
>;

export async function insertKey(
  db: Database,
  input: { name: string; admin: boolean; hash: string; prefix: string } & KeyPolicyColumns,
): Promise<ApiKeyRow> {
  const [row] = await db
    .insert(apiKeys)
    .values({ id: randomUUID(), createdAt: new Date(), ...input })
    .returning();
  if (!row) throw new Error("insert into api_keys returned no row");
  return row;
}

const keyByHash = preparedFor((db) =>
  db
    .select()
    .from(apiKeys)
    .where(eq(apiKeys.hash, sql.placeholder("hash")))
    .prepare("key_by_hash"),
);

export async function findKeyByHash(db: Database, hash: string): Promise<ApiKeyRow | undefined> {
  const [row] = await keyByHash(db).execute({ hash });
  return row;
}

export async function getKey(db: Database, id: string): Promise<ApiKeyRow | undefined> {
  const [row] = await db.select().from(apiKeys).where(eq(apiKeys.id, id));
  return row;
}

/**
 * What the model gateway's admission of a call reads of a key: its `models` and its monthly cap,
 * and no more; undefined for a key that is gone.
 */
export async function callLimitsOfKey(
  db: Database,
  id: string,
): Promise<Pick<ApiKeyRow, "models" | "maxBudgetUsd"> | undefined> {
  const [row] = await db
    .select({ models: apiKeys.models, maxBudgetUsd: apiKeys.maxBudgetUsd })
    .from(apiKeys)
    .where(eq(apiKeys.id, id));
  return row;
}

export async function listKeys(db: Database): Promise<ApiKeyRow[]> {
  return db.select().from(apiKeys).orderBy(asc(apiKeys.createdAt), asc(apiKeys.id));
}

export async function countKeys(db: Database): Promise<number> {
  const [row] = await db.select({ n: count() }).from(apiKeys);
  return row?.n ?? 0;
}

const keyAndActiveCount = preparedFor((db) => {
  const active = db
    .select({ n: count().as("n") })
    .from(apiKeys)
    .where(isNull(apiKeys.revokedAt))
    .as("active");
  return db
    .select({ key: apiKeys, activeKeys: active.n })
    .from(active)
    .leftJoin(apiKeys, eq(apiKeys.id, sql.placeholder("id")))
    .prepare("key_and_active_count");
});

/**
 * The key (undefined when it is gone), and how many keys are not revoked, in one statement: a
 * run's gate asks both where runs are not sandboxed, before its CLI starts (on the embedded
 * database each statement holds the server's thread).
 */
export async function getKeyAndActiveCount(
  db: Database,
  id: string,
): Promise<{ key: ApiKeyRow | undefined; activeKeys: number }> {
  const [row] = await keyAndActiveCount(db).execute({ id });
  return { key: row?.key ?? undefined, activeKeys: row?.activeKeys ?? 0 };
}

/** The keys not revoked. */
export async function countActiveKeys(db: Database): Promise<number> {
  const [row] = await db.select({ n: count() }).from(apiKeys).where(isNull(apiKeys.revokedAt));
  return row?.n ?? 0;
}

/** Marks the key revoked (it stays listed); returns it, or undefined when there is none. */
export async function revokeKey(db: Database, id: string): Promise<ApiKeyRow | undefined> {
  const now = new Date();
  await db
    .update(apiKeys)
    .set({ revokedAt: now })
    .where(and(eq(apiKeys.id, id), isNull(apiKeys.revokedAt)));
  return getKey(db, id);
}

/**
 * The egress list of the key whose session the run is of (null for a session without a key: auth
 * off), and the run's own narrowing of it (null: none); for a run that is not there, nothing.
 */
export async function egressOfRun(
  db: Database,
  runId: string,
): Promise<{ key: string[] | null; run: string[] | null }> {
  const [row] = await db
    .select({ key: apiKeys.egress, run: runs.egress })
    .from(runs)
    .innerJoin(sessions, eq(sessions.id, runs.sessionId))
    .leftJoin(apiKeys, eq(apiKeys.id, sessions.ownerKeyId))
    .where(eq(runs.id, runId));
  if (!row) return { key: [], run: null };
  return row;
}

/** The key whose session the run is of; null for a session without one, or a run not there. */
export async function keyOfRun(db: Database, runId: string): Promise<string | null> {
  const [row] = await db
    .select({ keyId: sessions.ownerKeyId })
    .from(runs)
    .innerJoin(sessions, eq(sessions.id, runs.sessionId))
    .where(eq(runs.id, runId));
  return row?.keyId ?? null;
}

/** Changes the key's policy; returns the key, or undefined when there is none. */
export async function updateKeyPolicy(
  db: Database,
  id: string,
  policy: KeyPolicyColumns,
): Promise<ApiKeyRow | undefined> {
  if (Object.keys(policy).length === 0) return getKey(db, id);
  const [row] = await db.update(apiKeys).set(policy).where(eq(apiKeys.id, id)).returning();
  return row;
}

/** The first moment of the calendar month (UTC) that `at` falls in: a budget's period. */
export function monthOf(at: Date): Date {
  return new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), 1));
}

/** A cost inserted for a key and month that has one already adds to it. */
const addedToSpend = {
  target: [keySpend.keyId, keySpend.periodStart],
  set: { costUsd: sql`${keySpend.costUsd} + excluded.cost_usd` },
};

/** Adds a run's (or a metered call's) cost to its key's spend in the month it ended. */
export async function addKeySpend(db: Database, keyId: string, at: Date, usd: number) {
  await db
    .insert(keySpend)
    .values({ keyId, periodStart: monthOf(at), costUsd: usd })
    .onConflictDoUpdate(addedToSpend);
}

/** What the key's runs that ended in the month starting at `periodStart` cost, in USD. */
export async function monthSpend(db: Database, keyId: string, periodStart: Date): Promise<number> {
  const [row] = await db
    .select({ usd: keySpend.costUsd })
    .from(keySpend)
    .where(and(eq(keySpend.keyId, keyId), eq(keySpend.periodStart, periodStart)));
  return row?.usd ?? 0;
}

/** Records a use, at most once a minute per key, so that requests do not each cost a write. */
export async function touchKey(db: Database, id: string, now = new Date()) {
  await db
    .update(apiKeys)
    .set({ lastUsedAt: now })
    .where(
      and(
        eq(apiKeys.id, id),
        or(isNull(apiKeys.lastUsedAt), lt(apiKeys.lastUsedAt, new Date(now.getTime() - 60_000))),
      ),
    );
}
