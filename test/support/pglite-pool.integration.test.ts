import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import type { Database } from "../../src/store/db.js";
import { insertKey } from "../../src/store/keys.js";
import { insertSessionRun } from "./db.js";
import { lendPglite } from "./pglite-pool.js";

// The tests' embedded databases are lent and emptied, not made anew: what a test sees must still
// be what a new database would be.

async function count(db: Database, table: "sessions" | "runs"): Promise<number> {
  const { rows } = (await db.execute(
    sql`select count(*)::int as n from ${sql.identifier(table)}`,
  )) as unknown as {
    rows: { n: number }[];
  };
  return rows[0]?.n ?? -1;
}

const KEY = { name: "k", admin: false, hash: "h", prefix: "p" };

/**
 * Rejects as drizzle does when its PGlite is closed: a query's error has it as its cause, a
 * transaction's (which asks the client itself) is it.
 */
async function failsClosed(work: Promise<unknown>): Promise<void> {
  const err = await work.then(
    () => undefined,
    (e: unknown) => e as Error & { cause?: Error },
  );
  expect(err?.cause?.message ?? err?.message).toBe("PGlite is closed");
}

describe("the embedded test databases", () => {
  it("a database given back reaches the next caller empty, its keys numbered from the start again", async () => {
    const first = await lendPglite();
    const firstKey = await insertKey(first.db, KEY);
    await insertSessionRun(first.db, "hi", firstKey.id);
    expect(await count(first.db, "runs")).toBe(1);
    await first.close();
    const next = await lendPglite();
    try {
      expect(await count(next.db, "sessions")).toBe(0);
      expect(await count(next.db, "runs")).toBe(0);
      expect((await insertKey(next.db, KEY)).tenantNumber).toBe(firstKey.tenantNumber);
    } finally {
      await next.close();
    }
  });

  it("once closed, a caller's view fails as a closed database does, while the next caller's works", async () => {
    const first = await lendPglite();
    await first.close();
    const next = await lendPglite();
    try {
      await failsClosed(first.ping());
      await failsClosed(insertSessionRun(first.db));
      await next.ping();
      expect(await count(next.db, "sessions")).toBe(0);
    } finally {
      await next.close();
    }
  });

  it("a database whose schema a caller changed is not lent again", async () => {
    const first = await lendPglite();
    await first.db.execute(
      sql`create function test_changed() returns int language sql as 'select 1'`,
    );
    await first.close();
    const next = await lendPglite();
    try {
      await expect(next.db.execute(sql`select test_changed()`)).rejects.toMatchObject({
        cause: { message: "function test_changed() does not exist" },
      });
    } finally {
      await next.close();
    }
  });
});
