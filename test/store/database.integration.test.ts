import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDatabase } from "../../src/store/db.js";
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
