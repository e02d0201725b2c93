import postgres from "postgres";
import { describe, expect, it } from "vitest";
import { openDatabase } from "../../src/store/db.js";
import { addKeySpend, insertKey } from "../../src/store/keys.js";
import { insertSessionRun } from "./db.js";
import { createServerDatabase, onServer } from "./postgres-databases.js";

// The tests' migrated Postgres databases are lent again, emptied, not copied anew: what a test
// sees must still be what a new database would be, and what the last caller left running must
// not reach it.

type Lent = Awaited<ReturnType<typeof createServerDatabase>>;

/** The database's oid, which a rename keeps, and the rows of every public table. */
async function identityAndRows(url: string): Promise<{ oid: number; rows: number }> {
  return onServer(url, async (db) => {
    const [identity] = await db<{ oid: number }[]>`select oid::int
      from pg_database where datname = current_database()`;
    const tables = await db<{ name: string }[]>`select format('%I', tablename) as name
      from pg_tables where schemaname = 'public'`;
    const counts = tables.map(({ name }) => `(select count(*) from ${name})`).join(" + ");
    const [all] = await db.unsafe<{ rows: number }[]>(`select (${counts})::int as rows`);
    return { oid: identity?.oid ?? -1, rows: all?.rows ?? -1 };
  });
}

/** Rows in the tables a run and a key's spending reach, foreign keys between them included. */
async function fill(url: string): Promise<void> {
  const handle = await openDatabase({ kind: "postgres", url });
  try {
    const key = await insertKey(handle.db, { name: "k", admin: false, hash: "h", prefix: "p" });
    await insertSessionRun(handle.db, "hi", key.id);
    await addKeySpend(handle.db, key.id, new Date(), 1);
  } finally {
    await handle.close();
  }
}

async function lent<T>(work: (database: Lent) => Promise<T>): Promise<T> {
  const database = await createServerDatabase({ migrated: true });
  try {
    return await work(database);
  } finally {
    await database.drop();
  }
}

describe.skipIf(!process.env.TEST_DATABASE_URL)("the Postgres test databases", () => {
  it("a database given back reaches the next caller empty, under another name", async () => {
    const first = await createServerDatabase({ migrated: true });
    await fill(first.url);
    const before = await identityAndRows(first.url);
    expect(before.rows).toBeGreaterThanOrEqual(4);
    await first.drop();
    await lent(async (next) => {
      expect(next.url).not.toBe(first.url);
      expect(await identityAndRows(next.url)).toEqual({ oid: before.oid, rows: 0 });
    });
  });

  it("a connection the last caller left open is ended, and its URL reaches nothing after", async () => {
    const first = await createServerDatabase({ migrated: true });
    const left = postgres(first.url, { max: 1, onnotice: () => {} });
    try {
      await left`select 1`;
      await first.drop();
      await lent(async (next) => {
        // The pool connects again, to the old name, as a server a test left running would.
        await expect(left`select 1`).rejects.toMatchObject({ code: "3D000" });
        expect((await identityAndRows(next.url)).rows).toBe(0);
      });
    } finally {
      await left.end();
    }
  });

  it("a database whose schema a caller changed is dropped, not lent again", async () => {
    const first = await createServerDatabase({ migrated: true });
    await onServer(
      first.url,
      (db) => db`create function test_changed() returns int language sql as 'select 1'`,
    );
    await first.drop();
    await lent(async (next) => {
      await expect(onServer(next.url, (db) => db`select test_changed()`)).rejects.toMatchObject({
        code: "42883",
      });
    });
  });
});
