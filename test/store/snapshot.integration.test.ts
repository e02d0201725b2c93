import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { inOneSnapshot } from "../../src/store/db.js";
import { runs } from "../../src/store/schema.js";
import { BACKENDS, insertSessionRun, openTestDatabase, type TestDatabase } from "../support/db.js";

// A run's view is read in several statements (its row, its completion, its callback). Read apart,
// a run that finished in between showed as running with its callback already delivered (the
// three-instance webhook test met it); read in one snapshot, the statements agree. Only a server
// has other connections to commit in between: PGlite runs one statement at a time.

describe.skipIf(!BACKENDS.includes("postgres"))("one snapshot on postgres", () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await openTestDatabase("postgres");
  });
  afterAll(() => database?.destroy());

  const status = async (db: typeof database.db, id: string) =>
    (await db.select({ status: runs.status }).from(runs).where(eq(runs.id, id)))[0]?.status;

  it("does not see what another connection commits between its statements; the next read does", async () => {
    const { id } = await insertSessionRun(database.db);
    const seen = await inOneSnapshot(database.db, async (tx) => {
      const before = await status(tx, id);
      // Another connection of the pool: committed before the snapshot's second statement.
      await database.db.update(runs).set({ status: "succeeded" }).where(eq(runs.id, id));
      return [before, await status(tx, id)];
    });
    expect(seen).toEqual(["queued", "queued"]);
    expect(await status(database.db, id)).toBe("succeeded");
  });

  it("writes nothing: a write inside it is refused", async () => {
    const { id } = await insertSessionRun(database.db);
    await expect(
      inOneSnapshot(database.db, (tx) =>
        tx.update(runs).set({ status: "failed" }).where(eq(runs.id, id)),
      ),
    ).rejects.toMatchObject({ cause: { code: "25006" } });
    expect(await status(database.db, id)).toBe("queued");
  });
});
