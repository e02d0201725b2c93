import postgres from "postgres";
import { describe, expect, it } from "vitest";
import { openDatabase } from "../../src/store/db.js";
import { addKeySpend, insertKey } from "../../src/store/keys.js";
import { insertSessionRun } from "./db.js";
import {
  createDatabaseOn,
  createServerDatabase,
  dropAbandonedDatabases,
  onServer,
} from "./postgres-databases.js";

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

/**
 * Rows in the tables a run and a key's spending reach, foreign keys between them included; the
 * key's tenant number, counted by the database.
 */
async function fill(url: string): Promise<number> {
  const handle = await openDatabase({ kind: "postgres", url });
  try {
    const key = await insertKey(handle.db, { name: "k", admin: false, hash: "h", prefix: "p" });
    await insertSessionRun(handle.db, "hi", key.id);
    await addKeySpend(handle.db, key.id, new Date(), 1);
    return key.tenantNumber;
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
  it("a database given back reaches the next caller empty, under another name, its keys numbered from the start again", async () => {
    const first = await createServerDatabase({ migrated: true });
    const firstTenant = await fill(first.url);
    const before = await identityAndRows(first.url);
    expect(before.rows).toBeGreaterThanOrEqual(4);
    await first.drop();
    await lent(async (next) => {
      expect(next.url).not.toBe(first.url);
      expect(await identityAndRows(next.url)).toEqual({ oid: before.oid, rows: 0 });
      expect(await fill(next.url)).toBe(firstTenant);
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

  // Each change as a test could make it, and what the next caller would see if it were kept.
  it.each([
    {
      change: "a function",
      make: "create function test_changed() returns int language sql as 'select 1'",
      probe: "select count(*)::int as n from pg_proc where proname = 'test_changed'",
      fresh: 0,
    },
    {
      change: "a table's triggers (its foreign keys) disabled",
      make: "alter table runs disable trigger all",
      probe: "select count(*)::int as n from pg_trigger where tgenabled = 'D'",
      fresh: 0,
    },
    {
      change: "a column's NOT NULL dropped",
      make: "alter table sessions alter column permission_mode drop not null",
      probe: `select count(*)::int as n from pg_attribute
        where attrelid = 'sessions'::regclass and attname = 'permission_mode' and attnotnull`,
      fresh: 1,
    },
    {
      change: "a setting made for the database",
      make: "do $$ begin execute format('alter database %I set statement_timeout = 1234', current_database()); end $$",
      probe: "select (current_setting('statement_timeout') = '0')::int as n",
      fresh: 1,
    },
  ])("a database with $change is dropped, not lent again", async ({ make, probe, fresh }) => {
    const first = await createServerDatabase({ migrated: true });
    await onServer(first.url, (db) => db.unsafe(make));
    await first.drop();
    await lent(async (next) => {
      const [seen] = await onServer(next.url, (db) => db.unsafe<{ n: number }[]>(probe));
      expect(seen?.n).toBe(fresh);
    });
  });

  it("a run's start drops what a run killed hours ago left, and not what a run going on has", async () => {
    const server = process.env.TEST_DATABASE_URL ?? "";
    const startedAgo = (seconds: number) =>
      `agent_bridge_test_${Math.floor(Date.now() / 1000 - seconds).toString(16)}_abcdef_0123`;
    const [killed, going] = [startedAgo(4 * 3600), startedAgo(600)];
    await createDatabaseOn(server, killed);
    await createDatabaseOn(server, going);
    try {
      await dropAbandonedDatabases();
      const left = await onServer(
        server,
        (admin) => admin<{ datname: string }[]>`select datname from pg_database
          where datname in (${killed}, ${going})`,
      );
      expect(left.map((row) => row.datname)).toEqual([going]);
    } finally {
      await onServer(server, async (admin) => {
        for (const name of [killed, going]) await admin.unsafe(`drop database if exists ${name}`);
      });
    }
  });
});
