import { randomUUID } from "node:crypto";
import { and, eq, isNull } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueKey } from "../../src/auth/keys.js";
import { KeyRunLimitError, QueueFullError } from "../../src/runs/errors.js";
import type { Message } from "../../src/runs/message.js";
import { recordRun } from "../../src/runs/recording.js";
import { registerInstance } from "../../src/store/instances.js";
import type { NewRun } from "../../src/store/run-admission.js";
import { WORK_CHANNEL } from "../../src/store/run-claims.js";
import { feedEvents, runs } from "../../src/store/schema.js";
import { BACKENDS, insertSessionRun, openTestDatabase, type TestDatabase } from "../support/db.js";
import { waitUntil } from "../support/process.js";

// AGENT_BRIDGE_MAX_RUNS_PER_KEY is counted in the database, in the statement that writes a run,
// so that it holds over every instance on the database and however many submit at once: on
// Postgres under a lock of the key, on the embedded database (one statement at a time) without
// one. So is the bound on runs queued for any instance (AGENT_BRIDGE_MAX_QUEUED_RUNS per live
// instance), under a lock of its own.

const message: Message = {
  text: "hi",
  systemPrompt: null,
  trigger: "message",
  idempotencyKey: null,
};

describe.each(BACKENDS)("the per-key run limit on %s", (backend) => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await openTestDatabase(backend);
  });
  afterAll(() => database.destroy());

  const newKey = async () => (await issueKey(database.db, { name: "k", admin: false })).row.id;
  /** A run for a fresh session of the key (the session's own first run is open: one counts). */
  async function sessionOf(keyId: string): Promise<{ run: NewRun; opened: string }> {
    const opened = await insertSessionRun(database.db, "hi", keyId);
    const run: NewRun = {
      sessionId: opened.sessionId,
      instanceId: null,
      agent: "claude",
      status: "waiting",
      trigger: "message",
      prompt: "hi",
      systemPrompt: null,
      idempotencyKey: null,
      requestHash: null,
    };
    return { run, opened: opened.id };
  }
  // Counted under a lock on Postgres; the embedded database runs one statement at a time.
  const limitOf = (keyId: string, max: number) => ({
    keyId,
    max,
    retryAfterSeconds: () => 7,
    concurrent: backend === "postgres",
  });

  it("refuses a key's run once it has that many open (waiting ones too), not another key's, and counts no finished run", async () => {
    const { db } = database;
    const [key, other] = [await newKey(), await newKey()];
    const first = await sessionOf(key);
    await recordRun(db, first.run, message, [], limitOf(key, 2));
    // Open: the session's queued run and the waiting one.
    const second = await sessionOf(other);
    const refused = recordRun(db, second.run, message, [], limitOf(key, 2));
    await expect(refused).rejects.toBeInstanceOf(KeyRunLimitError);
    await expect(refused).rejects.toMatchObject({ limit: 2, retryAfterSeconds: 7 });
    await expect(recordRun(db, second.run, message, [], limitOf(other, 2))).resolves.toBeDefined();

    await db.update(runs).set({ status: "succeeded" }).where(eq(runs.id, first.opened));
    const third = await sessionOf(key);
    // Its session's own run makes two open again: the first session's waiting run and it.
    await expect(recordRun(db, third.run, message, [], limitOf(key, 2))).rejects.toBeInstanceOf(
      KeyRunLimitError,
    );
    await expect(recordRun(db, third.run, message, [], limitOf(key, 3))).resolves.toBeDefined();
  });

  it("writes no more than the limit when many runs of one key are submitted at once", async () => {
    const { db } = database;
    const key = await newKey();
    // Sessions made first, outside the limit, so that only the runs race.
    const sessions = [];
    for (let i = 0; i < 12; i++) {
      const { run, opened } = await sessionOf(key);
      await db.update(runs).set({ status: "succeeded" }).where(eq(runs.id, opened));
      sessions.push({ ...run, status: "queued" as const });
    }
    const outcomes = await Promise.allSettled(
      sessions.map((run) => recordRun(db, run, message, [], limitOf(key, 3))),
    );
    expect(outcomes.filter((o) => o.status === "fulfilled")).toHaveLength(3);
    for (const o of outcomes) {
      if (o.status === "rejected") expect(o.reason).toBeInstanceOf(KeyRunLimitError);
    }
  });

  it("writes neither the row nor the feed entry of a run its key's limit refuses", async () => {
    const { db } = database;
    const key = await newKey();
    const { run } = await sessionOf(key);
    await expect(recordRun(db, run, message, [], limitOf(key, 1))).rejects.toBeInstanceOf(
      KeyRunLimitError,
    );
    const written = await db.select().from(runs).where(eq(runs.sessionId, run.sessionId));
    expect(written.map((r) => r.status)).toEqual(["queued"]);
    const fed = await db
      .select({ type: feedEvents.type })
      .from(feedEvents)
      .where(eq(feedEvents.sessionId, run.sessionId))
      .orderBy(feedEvents.id);
    // The session's and its own run's.
    expect(fed.map((f) => f.type)).toEqual(["session_created", "run_queued"]);
  });

  it("refuses a run queued for any instance once the database holds the bound per live instance, and rings the instances for each it writes", async () => {
    const { db } = database;
    const heard: string[] = [];
    const listen = database.listen;
    if (!listen) throw new Error("the test database has no LISTEN");
    await new Promise<void>((listening, failed) => {
      listen(WORK_CHANNEL, (payload) => heard.push(payload), listening).catch(failed);
    });
    // Only this test's runs are queued for any instance.
    await db
      .update(runs)
      .set({ status: "succeeded" })
      .where(and(eq(runs.status, "queued"), isNull(runs.instanceId)));
    const unowned = (perInstance: number) => ({
      perInstance,
      ring: true,
      retryAfterSeconds: () => 9,
    });
    const queuedRun = async (): Promise<NewRun> => {
      const { run, opened } = await sessionOf(await newKey());
      await db.update(runs).set({ status: "succeeded" }).where(eq(runs.id, opened));
      return { ...run, status: "queued" };
    };
    const [first, second] = [await queuedRun(), await queuedRun()];
    // No instance holds a lease here: the bound counts this one all the same.
    // Each pinned to a host of its own, which its ring names.
    const on = (run: NewRun, host: string) => ({ ...run, pinnedHost: host });
    await expect(
      recordRun(db, on(first, "a"), message, [], null, unowned(1)),
    ).resolves.toMatchObject({
      status: "queued",
      instanceId: null,
    });
    const refused = recordRun(db, on(second, "refused"), message, [], null, unowned(1));
    await expect(refused).rejects.toBeInstanceOf(QueueFullError);
    await expect(refused).rejects.toMatchObject({ limit: 1, retryAfterSeconds: 9 });
    const fed = await db
      .select({ type: feedEvents.type })
      .from(feedEvents)
      .where(eq(feedEvents.sessionId, second.sessionId))
      .orderBy(feedEvents.id);
    expect(fed.map((f) => f.type)).toEqual(["session_created", "run_queued"]);
    await expect(
      recordRun(db, on(second, "b"), message, [], null, unowned(2)),
    ).resolves.toMatchObject({
      status: "queued",
    });
    // In the order of their commits: the refused run's would be between.
    await waitUntil(() => heard.length >= 2, "two rings on the work channel");
    expect(heard).toEqual(["a", "b"]);

    // Two instances with a lease, one whose lease has run out: the bound is two runs.
    const instance = (leaseMs: number) =>
      registerInstance(
        db,
        { id: randomUUID(), host: "h", bootId: null, pid: 1, version: "test" },
        leaseMs,
      );
    await Promise.all([instance(60_000), instance(60_000), instance(-60_000)]);
    const third = await queuedRun();
    const overTwo = recordRun(db, third, message, [], null, unowned(1));
    await expect(overTwo).rejects.toMatchObject({ limit: 2 });
    await expect(recordRun(db, third, message, [], null, unowned(2))).resolves.toMatchObject({
      status: "queued",
    });
  });

  it("takes bounds beyond a 32-bit integer, as the settings allow", async () => {
    const { db } = database;
    const key = await newKey();
    const { run, opened } = await sessionOf(key);
    await db.update(runs).set({ status: "succeeded" }).where(eq(runs.id, opened));
    const huge = Number.MAX_SAFE_INTEGER;
    const unowned = { perInstance: huge, ring: false, retryAfterSeconds: () => 1 };
    await expect(
      recordRun(db, { ...run, status: "queued" }, message, [], limitOf(key, huge), unowned),
    ).resolves.toMatchObject({ status: "queued" });
  });
});
