import { randomUUID } from "node:crypto";
import { and, eq, isNull } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { claimQueuedRun } from "../../src/store/runs.js";
import { runs } from "../../src/store/schema.js";
import { BACKENDS, insertSessionRun, openTestDatabase, type TestDatabase } from "../support/db.js";

// Claiming a queued run that no instance owns takes exactly one, the oldest, however many wait.

describe.each(BACKENDS)("claiming queued runs on %s", (backend) => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await openTestDatabase(backend);
  });
  afterAll(() => database.destroy());

  /** A queued run of a new session, that no instance owns. */
  const unownedRun = async () => (await insertSessionRun(database.db)).id;

  it("takes the oldest one alone, leaving the others for any instance", async () => {
    const ids = [];
    for (let i = 0; i < 5; i++) ids.push(await unownedRun());
    const me = randomUUID();
    const claimed = await claimQueuedRun(database.db, me, "host");
    expect(claimed?.run.id).toBe(ids[0]);
    const mine = await database.db.select().from(runs).where(eq(runs.instanceId, me));
    expect(mine.map((r) => r.id)).toEqual([ids[0]]);
    const left = await database.db
      .select()
      .from(runs)
      .where(and(eq(runs.status, "queued"), isNull(runs.instanceId)));
    expect(left).toHaveLength(4);
  });
});
