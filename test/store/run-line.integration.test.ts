import { randomUUID } from "node:crypto";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { admissionState, promoteWaitingRun } from "../../src/store/run-admission.js";
import type { RunRow } from "../../src/store/schema.js";
import { runs } from "../../src/store/schema.js";
import {
  BACKENDS,
  insertRun,
  insertSessionRun,
  openTestDatabase,
  type TestDatabase,
} from "../support/db.js";

// A session's line in the database: its waiting runs take the session's turn in the order they
// were written, whichever instance wrote each and holds it in its own memory's line.

describe.each(BACKENDS)("a session's line of waiting runs on %s", (backend) => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await openTestDatabase(backend);
  });
  afterAll(() => database.destroy());

  const wait = (live: RunRow, prompt: string, instanceId: string) =>
    insertRun(database.db, {
      sessionId: live.sessionId,
      instanceId,
      agent: "claude",
      status: "waiting",
      trigger: "message",
      prompt,
      systemPrompt: null,
      idempotencyKey: null,
      requestHash: null,
    });
  const finish = (id: string) =>
    database.db.update(runs).set({ status: "succeeded" }).where(eq(runs.id, id));

  it("promotes only the first waiting run once the session is free; a later one, of any instance, stays behind it", async () => {
    const live = await insertSessionRun(database.db, "live");
    const [a, b] = [randomUUID(), randomUUID()];
    const first = await wait(live, "first", b);
    const second = await wait(live, "second", a);
    const third = await wait(live, "third", b);
    expect(await admissionState(database.db, live.sessionId)).toMatchObject({
      activeRunId: live.id,
      waitingRunId: first.id,
    });

    await finish(live.id);
    expect(await promoteWaitingRun(database.db, second.id)).toBe("behind");
    expect(await promoteWaitingRun(database.db, third.id)).toBe("behind");
    expect(await promoteWaitingRun(database.db, first.id)).toMatchObject({
      run: { id: first.id, status: "queued" },
    });
    // The session is busy again: the next one is refused by the active run's index.
    await expect(promoteWaitingRun(database.db, second.id)).rejects.toThrow();
    expect(await admissionState(database.db, live.sessionId)).toMatchObject({
      activeRunId: first.id,
      waitingRunId: second.id,
    });

    await finish(first.id);
    expect(await promoteWaitingRun(database.db, third.id)).toBe("behind");
    expect(await promoteWaitingRun(database.db, second.id)).toMatchObject({
      run: { id: second.id },
    });
  });

  it("a waiting run that left the line (cancelled) no longer holds back those after it", async () => {
    const live = await insertSessionRun(database.db, "live");
    const first = await wait(live, "first", randomUUID());
    const second = await wait(live, "second", randomUUID());
    await finish(live.id);
    await database.db.update(runs).set({ status: "cancelled" }).where(eq(runs.id, first.id));
    expect(await promoteWaitingRun(database.db, first.id)).toBeUndefined();
    expect(await promoteWaitingRun(database.db, second.id)).toMatchObject({
      run: { id: second.id, status: "queued" },
    });
    expect(await admissionState(database.db, live.sessionId)).toMatchObject({
      activeRunId: second.id,
      waitingRunId: null,
    });
  });
});
