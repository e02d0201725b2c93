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
