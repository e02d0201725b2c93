import { and, eq, isNull, lt, ne, sql } from "drizzle-orm";
import type { Database } from "./db.js";
import { instances } from "./schema.js";

// The instances' table: each server process's row and lease. Every time here is the database's
// (`now()`), so that instances whose clocks disagree still agree on whose lease has expired.

export type InstanceRow = typeof instances.$inferSelect;

export interface NewInstance {
  id: string;
  host: string;
  bootId: string | null;
  pid: number;
  version: string;
}

const leaseEnd = (leaseMs: number) => sql`now() + ${`${leaseMs} milliseconds`}::interval`;

export async function registerInstance(db: Database, instance: NewInstance, leaseMs: number) {
  await db.insert(instances).values({
    ...instance,
    startedAt: new Date(),
    heartbeatAt: sql`now()`,
    leaseExpiresAt: leaseEnd(leaseMs),
  });
}

/**
 * Extends the instance's lease; false when it has been reaped meanwhile (another instance saw
 * the lease expired and closed its runs). A lease that expired but was not reaped is taken back:
 * a database outage longer than the lease, with no other instance to notice, ends nothing.
 */
export async function renewLease(db: Database, id: string, leaseMs: number): Promise<boolean> {
  const renewed = await db
    .update(instances)
    .set({ heartbeatAt: sql`now()`, leaseExpiresAt: leaseEnd(leaseMs) })
    .where(and(eq(instances.id, id), isNull(instances.reapedAt)))
    .returning({ id: instances.id });
  return renewed.length > 0;
}

/** Other instances not reaped yet: those whose lease has expired, and those on `host`. */
export async function reapCandidates(
  db: Database,
  self: string,
  host: string,
): Promise<Array<InstanceRow & { expired: boolean }>> {
  return db
    .select({ ...instanceColumns, expired: sql<boolean>`${instances.leaseExpiresAt} < now()` })
    .from(instances)
    .where(
      and(
        ne(instances.id, self),
        isNull(instances.reapedAt),
        sql`(${instances.leaseExpiresAt} < now() or ${instances.host} = ${host})`,
      ),
    );
}

const instanceColumns = {
  id: instances.id,
  host: instances.host,
  bootId: instances.bootId,
  pid: instances.pid,
  version: instances.version,
  startedAt: instances.startedAt,
  heartbeatAt: instances.heartbeatAt,
  leaseExpiresAt: instances.leaseExpiresAt,
  reapedAt: instances.reapedAt,
};

/** Marks the instance reaped: its runs are closed. */
export async function markReaped(db: Database, id: string) {
  await db
    .update(instances)
    .set({ reapedAt: sql`now()` })
    .where(and(eq(instances.id, id), isNull(instances.reapedAt)));
}

/** Forgets instances reaped more than `olderThanMs` ago (their rows only serve as a record). */
export async function forgetReapedInstances(db: Database, olderThanMs: number) {
  await db
    .delete(instances)
    .where(lt(instances.reapedAt, sql`now() - ${`${olderThanMs} milliseconds`}::interval`));
}

/** An instance whose lease holds: not reaped, its lease not run out by the database's clock. */
export const liveInstance = and(
  isNull(instances.reapedAt),
  sql`${instances.leaseExpiresAt} > now()`,
);

/** Instances whose lease holds (on `host`, when given). */
export async function countLiveInstances(db: Database, host?: string): Promise<number> {
  const [row] = await db
    .select({ n: sql<number>`count(*)::int` })
    .from(instances)
    .where(and(liveInstance, host === undefined ? undefined : eq(instances.host, host)));
  return row?.n ?? 0;
}
