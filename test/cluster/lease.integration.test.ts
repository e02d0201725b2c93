import { randomUUID } from "node:crypto";
import { eq, sql } from "drizzle-orm";
import { afterEach, describe, expect, it } from "vitest";
import { Doorbell } from "../../src/cluster/doorbell.js";
import { InstanceLease } from "../../src/cluster/lease.js";
import { silentLogger } from "../../src/log.js";
import type { DeadInstance } from "../../src/runs/cluster-port.js";
import { registerInstance } from "../../src/store/instances.js";
import { instances } from "../../src/store/schema.js";
import { BACKENDS, openTestDatabase, type TestDatabase } from "../support/db.js";
import { ManualClock } from "../support/manual-clock.js";

// The lease's renewals and the polling doorbell on a manual clock: each comes at its interval and
// not before. Whose lease has expired is the database's time, so an expiry is made there.

describe.each(BACKENDS)("an instance's lease on %s", (backend) => {
  let database: TestDatabase | undefined;
  afterEach(async () => {
    await database?.destroy();
  });

  it("renews at each interval of its clock, not before, and reaps there an instance whose lease the database says has expired", async () => {
    database = await openTestDatabase(backend);
    const { db } = database;
    const clock = new ManualClock();
    const reaped: (DeadInstance | null)[] = [];
    let ticks = 0;
    const lease = new InstanceLease({
      db,
      logger: silentLogger,
      leaseMs: 60_000,
      renewMs: 1_000,
      host: "here",
      exclusive: false,
      reap: async (instance) => void reaped.push(instance),
      onLost: () => {},
      onTick: () => void ticks++,
      clock,
    });
    await lease.start();
    // Another instance, elsewhere, with its lease.
    const other = randomUUID();
    await registerInstance(
      db,
      { id: other, host: "elsewhere", bootId: null, pid: 1, version: "test" },
      60_000,
    );

    await clock.advance(999);
    expect(ticks).toBe(0);
    await clock.advance(1);
    // Renewed (onTick follows the renewal and the sweep).
    expect(ticks).toBe(1);
    // Its lease live, the other instance is left alone.
    expect(reaped).toEqual([null]);

    await db
      .update(instances)
      .set({ leaseExpiresAt: sql`now() - interval '1 second'` })
      .where(eq(instances.id, other));
    await clock.advance(999);
    expect(reaped).toEqual([null]);
    await clock.advance(1);
    expect(ticks).toBe(2);
    expect(reaped).toEqual([null, { id: other, processGone: false }]);

    await lease.stop();
    expect(clock.pending).toBe(0);
  });
});

describe("the polling doorbell", () => {
  it("wakes everyone at each poll interval of its clock, and not before, until stopped", async () => {
    const clock = new ManualClock();
    const doorbell = new Doorbell({
      mode: "poll",
      pollMs: 500,
      self: () => "me",
      host: "here",
      clock,
    });
    let work = 0;
    let commands = 0;
    doorbell.onWork(() => void work++);
    doorbell.onCommands(() => void commands++);
    const watch = doorbell.watch("run");
    await doorbell.start();
    await clock.advance(499);
    expect([work, commands]).toEqual([0, 0]);
    await clock.advance(1);
    expect([work, commands]).toEqual([1, 1]);
    // The follower of a run is woken to read what it may have missed.
    expect(await watch.next(0)).toBe(true);
    await clock.advance(1_000);
    expect([work, commands]).toEqual([3, 3]);
    doorbell.stop();
    await clock.advance(1_000);
    expect([work, commands]).toEqual([3, 3]);
    watch.close();
  });
});
