import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { inOneRoundTrip, inTwoRoundTrips, openDatabase, returnedRows } from "../../src/store/db.js";
import { uniqueViolation } from "../../src/store/errors.js";
import { REPREPARE_AFTER_MS } from "../../src/store/pglite-client.js";
import { BACKENDS, openTestDatabase, type TestDatabase } from "../support/db.js";
import { createServerDatabase } from "../support/postgres-databases.js";

// Node corks an HTTP response's writes until the next tick: a statement that ran ahead of the
// ticks queued before it held back SSE frames already sent (PGlite runs in this thread).

describe.each(BACKENDS)("database on %s", (backend) => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await openTestDatabase(backend);
  });
  afterAll(() => database.destroy());

  it("runs a statement only after the ticks queued before it", async () => {
    const order: string[] = [];
    process.nextTick(() => order.push("tick"));
    await database.db.execute(sql`select 1`);
    order.push("statement");
    expect(order).toEqual(["tick", "statement"]);
  });

  it("begins a transaction only after the ticks queued before it", async () => {
    const order: string[] = [];
    process.nextTick(() => order.push("tick"));
    await database.db.transaction(async (tx) => {
      order.push("transaction");
      await tx.execute(sql`select 1`);
    });
    expect(order).toEqual(["tick", "transaction"]);
  });

  describe("transactions sent in round trips", () => {
    const table = `round_trips_${backend}`;
    const values = async () =>
      returnedRows<{ v: number }>(
        await database.db.execute(sql.raw(`select v from ${table} order by v`)),
      ).map((r) => r.v);
    const insert = (v: number) =>
      sql`insert into ${sql.identifier(table)} (v) values (${v}) returning v`;
    /** Connections of this database left inside a transaction (none on the embedded one). */
    const leftInTransaction = async () =>
      backend === "pglite"
        ? 0
        : Number(
            returnedRows<{ n: string }>(
              await database.db.execute(
                sql`select count(*) as n from pg_stat_activity
                  where datname = current_database() and state like 'idle in transaction%'`,
              ),
            )[0]?.n,
          );
    beforeAll(async () => {
      await database.db.execute(sql.raw(`create table ${table} (v integer primary key)`));
    });
    afterAll(async () => {
      await database.db.execute(sql.raw(`drop table ${table}`));
    });

    it("makes the second step of the first's answers, and commits both", async () => {
      const value = await inTwoRoundTrips(database.db, [insert(1), insert(2)], (answers) => {
        const sum = answers
          .flatMap((a) => returnedRows<{ v: number }>(a))
          .reduce((n, r) => n + r.v, 0);
        return { statements: [insert(sum * 10)], value: sum };
      });
      expect(value).toBe(3);
      expect(await values()).toEqual([1, 2, 30]);
    });

    it("rolls the first step back when the second is not made, and the next statement runs", async () => {
      const refused = inTwoRoundTrips(database.db, [insert(4)], () => {
        throw new Error("not now");
      });
      await expect(refused).rejects.toThrow("not now");
      // The connection went back to the pool out of the transaction.
      expect(await leftInTransaction()).toBe(0);
      await Promise.all([5, 6, 7].map((v) => database.db.execute(insert(v))));
      expect(await values()).toEqual([1, 2, 5, 6, 7, 30]);
    });

    it("rolls the first step back when one of its statements fails, and throws its failure", async () => {
      const failed = inTwoRoundTrips(database.db, [insert(11), insert(1)], () => ({
        statements: [insert(12)],
        value: undefined,
      }));
      expect(await failed.catch(uniqueViolation)).toBe(`${table}_pkey`);
      expect(await leftInTransaction()).toBe(0);
      expect(await values()).toEqual([1, 2, 5, 6, 7, 30]);
    });

    it("rolls both steps back when a statement of the second fails, and throws its failure", async () => {
      const failed = inTwoRoundTrips(database.db, [insert(8)], () => ({
        statements: [insert(9), insert(1)],
        value: undefined,
      }));
      expect(await failed.catch(uniqueViolation)).toBe(`${table}_pkey`);
      const once = inOneRoundTrip(database.db, [insert(10), insert(2)]);
      expect(await once.catch(uniqueViolation)).toBe(`${table}_pkey`);
      expect(await leftInTransaction()).toBe(0);
      expect(await values()).toEqual([1, 2, 5, 6, 7, 30]);
    });
  });
});

// The embedded database keeps as text, itself, the types Drizzle's driver passes parsers for with
// each statement (db.ts): what a statement reads is what it read with Drizzle's own parsers.
describe("the embedded database's types kept as text", () => {
  it("reads dates, times, intervals and their arrays as Drizzle's parsers did, in and out of a transaction", async () => {
    const select = sql`select '2026-12-06 10:00:00.123+00'::timestamptz as tz,
      '2026-12-06 10:00:00'::timestamp as ts, '2026-12-06'::date as d, '1 day 2 hours'::interval as i,
      array['1.50'::numeric] as n, array['2026-12-06 10:00:00'::timestamp] as tsa,
      array['2026-12-06 10:00:00+00'::timestamptz] as tza, array['1 day'::interval] as ia,
      array['2026-12-06'::date] as da`;
    const expected = {
      tz: "2026-12-06 10:00:00.123+00",
      ts: "2026-12-06 10:00:00",
      d: "2026-12-06",
      i: "1 day 02:00:00",
      n: "{1.50}",
      tsa: '{"2026-12-06 10:00:00"}',
      tza: '{"2026-12-06 10:00:00+00"}',
      ia: '{"1 day"}',
      da: "{2026-12-06}",
    };
    const embedded = await openDatabase({ kind: "pglite" });
    try {
      const rows = (r: unknown) => (r as { rows: unknown[] }).rows;
      expect(rows(await embedded.db.execute(select))).toEqual([expected]);
      const inTransaction = await embedded.db.transaction((tx) => tx.execute(select));
      expect(rows(inTransaction)).toEqual([expected]);
    } finally {
      await embedded.close();
    }
  });
});

// A statement the embedded database has seen before is prepared once under a name and then bound
// and run in one call (pglite-client.ts): what it reads and how it fails are as before.
describe("the embedded database's prepared statements", () => {
  // On a data dir, as the service runs it: the server's settings are its start's.
  let embedded: TestDatabase;
  beforeAll(async () => {
    embedded = await openTestDatabase("pglite");
  });
  afterAll(() => embedded.destroy());

  const rows = (r: unknown) => (r as { rows: Record<string, unknown>[] }).rows;
  const prepared = async () =>
    rows(await embedded.db.execute(sql`select name, statement from pg_prepared_statements`));
  /** Every type a parameter of the service's is bound as, long text (sent as bytes) among them. */
  const select = (n: number) =>
    sql`select ${"x".repeat(5000)}::text as long, ${'é ☃ "quoted"'}::text as short,
      ${n}::int as n, ${true}::boolean as b, ${null}::text as nothing,
      ${"11111111-2222-4333-8444-555555555555"}::uuid as id,
      ${JSON.stringify({ k: [1, "two"] })}::jsonb as doc,
      ${new Date("2026-12-06T10:00:00Z").toISOString()}::timestamptz as at`;
  const expected = (n: number) => ({
    long: "x".repeat(5000),
    short: 'é ☃ "quoted"',
    n,
    b: true,
    nothing: null,
    id: "11111111-2222-4333-8444-555555555555",
    doc: { k: [1, "two"] },
    at: "2026-12-06 10:00:00+00",
  });

  const named = (all: Record<string, unknown>[]) =>
    all.filter((row) => String(row.statement).includes("as nothing"));

  it("prepares a statement the second time it is run, once, and reads the same through it, in a transaction too", async () => {
    expect(rows(await embedded.db.execute(select(1)))).toEqual([expected(1)]);
    expect(named(await prepared())).toHaveLength(0);
    for (const n of [2, 3])
      expect(rows(await embedded.db.execute(select(n)))).toEqual([expected(n)]);
    expect(named(await prepared())).toHaveLength(1);
    const inTransaction = await embedded.db.transaction((tx) => tx.execute(select(4)));
    expect(rows(inTransaction)).toEqual([expected(4)]);
    expect(named(await prepared())).toHaveLength(1);
  });

  it("fails as PGlite's own query does, and a transaction that failed leaves its statements usable", async () => {
    await embedded.db.execute(sql`create table prepared_t (id int primary key)`);
    const insert = (id: number) => embedded.db.execute(sql`insert into prepared_t values (${id})`);
    await insert(1);
    await insert(2);
    const failed = await insert(1).catch((err: unknown) => err);
    const cause = (failed as { cause?: { code?: string; query?: string } }).cause;
    expect(cause?.code).toBe("23505");
    expect(cause?.query).toContain("insert into prepared_t");
    // The second time a new text is run, in a transaction that then fails, it is prepared.
    const insertNamed = (db: typeof embedded.db, id: number) =>
      db.execute(sql`insert into prepared_t (id) values (${id})`);
    await expect(
      embedded.db.transaction(async (tx) => {
        await insertNamed(tx, 3);
        await insertNamed(tx, 3);
      }),
    ).rejects.toThrow();
    await insertNamed(embedded.db, 3);
    const ids = rows(await embedded.db.execute(sql`select id from prepared_t order by id`));
    expect(ids.map((row) => row.id)).toEqual([1, 2, 3]);
  });

  it("keeps 256 statements prepared at most, closing the least recently used", async () => {
    const numbered = (i: number) => sql`select ${i}::int + ${sql.raw(String(i))} as v`;
    for (let i = 0; i < 300; i++) {
      for (const _ of [1, 2])
        expect(rows(await embedded.db.execute(numbered(i)))).toEqual([{ v: 2 * i }]);
    }
    const ours = (await prepared()).filter((row) => String(row.statement).includes("::int + "));
    expect(ours.length).toBeLessThanOrEqual(256);
    expect(ours.length).toBeGreaterThan(200);
    // The first ones were closed; they run again all the same.
    expect(rows(await embedded.db.execute(numbered(0)))).toEqual([{ v: 0 }]);
  });

  it("prepares a statement again after a minute, so that its plan is chosen again on the tables as they are", async () => {
    const names = async () => named(await prepared()).map((row) => row.name);
    for (const n of [1, 2]) await embedded.db.execute(select(n));
    const [first] = await names();
    vi.useFakeTimers({ toFake: ["Date"], now: Date.now() + REPREPARE_AFTER_MS + 1 });
    try {
      expect(rows(await embedded.db.execute(select(3)))).toEqual([expected(3)]);
      const again = await names();
      expect(again).toHaveLength(1);
      expect(again).not.toContain(first);
    } finally {
      vi.useRealTimers();
    }
  });

  it("prepares again what `discard all` dropped", async () => {
    for (const n of [1, 2]) await embedded.db.execute(select(n));
    await embedded.db.execute(sql`discard all`);
    expect(named(await prepared())).toEqual([]);
    expect(rows(await embedded.db.execute(select(5)))).toEqual([expected(5)]);
  });
});

describe.skipIf(!process.env.TEST_DATABASE_URL)(
  "instances opening one new Postgres database",
  () => {
    it("bring its schema up to date once, all of them, when they start at the same time", async () => {
      const { url, drop } = await createServerDatabase();
      try {
        const opened = await Promise.allSettled(
          [1, 2, 3].map(() => openDatabase({ kind: "postgres", url })),
        );
        for (const result of opened) {
          if (result.status === "rejected") throw result.reason;
          await result.value.close();
        }
      } finally {
        await drop();
      }
    });
  },
);
