import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BACKENDS, openTestDatabase, type TestDatabase } from "../support/db.js";

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
