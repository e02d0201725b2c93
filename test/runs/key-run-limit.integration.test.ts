import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueKey } from "../../src/auth/keys.js";
import { KeyRunLimitError } from "../../src/runs/errors.js";
import type { Message } from "../../src/runs/message.js";
import { recordRun } from "../../src/runs/recording.js";
import type { NewRun } from "../../src/store/run-admission.js";
import { runs } from "../../src/store/schema.js";
import { BACKENDS, insertSessionRun, openTestDatabase, type TestDatabase } from "../support/db.js";

// AGENT_BRIDGE_MAX_RUNS_PER_KEY is counted in the database, in the transaction that writes a run,
// so that it holds over every instance on the database and however many submit at once: on
// Postgres under a lock of the key, on the embedded database without one.

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
  // Counted under a lock on Postgres; the embedded database runs one transaction at a time.
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
});
