import { randomUUID } from "node:crypto";
import { and, eq, isNull } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueKey } from "../../src/auth/keys.js";
import { claimQueuedRun, claimRun, releaseClaims } from "../../src/store/run-claims.js";
import { runs } from "../../src/store/schema.js";
import { BACKENDS, insertSessionRun, openTestDatabase, type TestDatabase } from "../support/db.js";

// Claiming a queued run that no instance owns takes exactly one, however many wait: the oldest of
// the key running the fewest runs on all instances; a claim whose answer the instance did not
// hear is given back by its token.

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
    const claimed = await claimQueuedRun(
      database.db,
      { instanceId: me, token: randomUUID() },
      "host",
    );
    expect(claimed?.run.id).toBe(ids[0]);
    const mine = await database.db.select().from(runs).where(eq(runs.instanceId, me));
    expect(mine.map((r) => r.id)).toEqual([ids[0]]);
    const left = await database.db
      .select()
      .from(runs)
      .where(and(eq(runs.status, "queued"), isNull(runs.instanceId)));
    expect(left).toHaveLength(4);
  });

  const owner = async (id: string) =>
    (
      await database.db
        .select({ instanceId: runs.instanceId, token: runs.claimToken, status: runs.status })
        .from(runs)
        .where(eq(runs.id, id))
    )[0];

  it("gives back by token the runs of those claims alone, still queued and the instance's", async () => {
    const me = randomUUID();
    const [first, second, started] = [randomUUID(), randomUUID(), randomUUID()];
    const [a, b, c] = [await unownedRun(), await unownedRun(), await unownedRun()];
    await claimRun(database.db, a, { instanceId: me, token: first });
    await claimRun(database.db, b, { instanceId: me, token: second });
    await claimRun(database.db, c, { instanceId: me, token: started });
    await database.db.update(runs).set({ status: "running" }).where(eq(runs.id, c));

    const released = await releaseClaims(database.db, me, [first, started, randomUUID()]);
    expect(released).toEqual([{ id: a, pinnedHost: null, claimToken: first }]);
    expect(await owner(a)).toEqual({ instanceId: null, token: first, status: "queued" });
    expect(await owner(b)).toEqual({ instanceId: me, token: second, status: "queued" });
    expect(await owner(c)).toEqual({ instanceId: me, token: started, status: "running" });
    // Another instance's claim under the same token is not this instance's to give back.
    expect(await releaseClaims(database.db, randomUUID(), [second])).toEqual([]);
    expect(await owner(b)).toMatchObject({ instanceId: me });
  });
});

describe.each(BACKENDS)("the turn of each key in the shared queue on %s", (backend) => {
  let database: TestDatabase;
  beforeAll(async () => {
    // Its own: the runs queued by the tests above would take part.
    database = await openTestDatabase(backend);
  });
  afterAll(() => database.destroy());

  it("goes to the key with the fewest runs running or claimed on any instance, keyless runs as one key, then to its oldest run", async () => {
    const { db } = database;
    const newKey = async () => (await issueKey(db, { name: "k", admin: false })).row.id;
    const [keyA, keyB] = [await newKey(), await newKey()];
    const [x, y] = [randomUUID(), randomUUID()];
    const start = Date.now() - 60_000;
    let made = 0;
    /** A run of a new session of `key` (null: none), queued with no owner, made after the last. */
    const queued = async (key: string | null) => {
      const { id } = await insertSessionRun(db, "hi", key);
      await db
        .update(runs)
        .set({ createdAt: new Date(start + made++ * 1000) })
        .where(eq(runs.id, id));
      return id;
    };
    // A: one running on X, one claimed by Y; keyless: one running on Y.
    const [runningA, claimedA, runningKeyless] = [
      await queued(keyA),
      await queued(keyA),
      await queued(null),
    ];
    await db.update(runs).set({ status: "running", instanceId: x }).where(eq(runs.id, runningA));
    await claimRun(db, claimedA, { instanceId: y, token: randomUUID() });
    await db
      .update(runs)
      .set({ status: "running", instanceId: y })
      .where(eq(runs.id, runningKeyless));
    // Queued oldest first: two of A's, one keyless, then B's.
    const [a1, a2, keyless, b1] = [
      await queued(keyA),
      await queued(keyA),
      await queued(null),
      await queued(keyB),
    ];

    const claims = [];
    for (let i = 0; i < 5; i++) {
      claims.push(
        (await claimQueuedRun(db, { instanceId: x, token: randomUUID() }, "host"))?.run.id,
      );
    }
    // B runs none; then the keyless one (one running) before A's (two), queued earlier; then A's.
    expect(claims).toEqual([b1, keyless, a1, a2, undefined]);
  });
});
