import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bareCompletion } from "../../src/events.js";
import { silentLogger } from "../../src/log.js";
import { CompletionRecorder } from "../../src/runs/recording.js";
import type { Database } from "../../src/store/db.js";
import { getCompletionEvent } from "../../src/store/events.js";
import { getRun } from "../../src/store/runs.js";
import { createTestApp, httpApi, listen, type TestApp } from "../support/app.js";
import { BACKENDS, insertSessionRun, openTestDatabase, type TestDatabase } from "../support/db.js";
import { type FakeCli, fakeCli } from "../support/fake-cli.js";
import { longRun } from "../support/fake-scenarios.js";
import { SseReader } from "../support/sse.js";

// Recording a run's end when the database refuses its outcome: the run is recorded as failed,
// keeping its spend, with the database's code and none of its text; never a rejection.

/**
 * A real refusal: the database refuses to end a run `status` with `errcode` (22021 is refused for
 * good; 40001, a serialization failure, is transient, as an outage is) until the returned
 * function lifts it.
 */
async function refuseRunsEnding(db: Database, status: string, errcode: string) {
  const name = `test_refuse_${status}`;
  await db.execute(
    sql.raw(`create function ${name}() returns trigger language plpgsql as $$ begin
      raise exception 'test: refused' using errcode = '${errcode}';
    end $$`),
  );
  await db.execute(
    sql.raw(`create trigger ${name} before update on runs
      for each row when (new.status = '${status}') execute function ${name}()`),
  );
  return async () => {
    await db.execute(sql.raw(`drop trigger ${name} on runs`));
  };
}

/** A recorder on `db` with a short outage bound; `settled` collects what it settles. */
function recorderOn(db: Database, outageBoundMs: number) {
  const settled: [string, boolean][] = [];
  const recorder = new CompletionRecorder({
    db,
    logger: silentLogger,
    outageBoundMs,
    onSettled: (runId, stored) => settled.push([runId, stored]),
  });
  return { recorder, settled };
}

describe.each(BACKENDS)("the completion recorder on %s", (backend) => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await openTestDatabase(backend);
    await refuseRunsEnding(database.db, "succeeded", "22021");
  });
  afterAll(() => database.destroy());

  it("records an outcome the database refuses as a failure with the spend, and stores that", async () => {
    const { db } = database;
    const row = await insertSessionRun(db);
    const { recorder, settled } = recorderOn(db, 1000);
    const succeeded = {
      ...bareCompletion("succeeded", ""),
      is_error: false,
      error: null,
      result: "all done",
      cost_usd: 0.5,
    };
    const { entry, state } = await recorder.record(row, { seq: 1, publicSeq: 1 }, succeeded, []);
    expect(state).toBe("stored");
    const published = JSON.parse(entry.json);
    expect(published).toMatchObject({
      status: "failed",
      result: null,
      cost_usd: 0.5,
      error:
        "the run's outcome could not be stored: the database refused the statement (SQLSTATE 22021)",
    });
    expect(await getCompletionEvent(db, row.id)).toEqual(published);
    expect((await getRun(db, row.id))?.status).toBe("failed");
    expect(settled).toEqual([]);
  });

  it("stores a completion that waits once, however many ask for it at the same time", async () => {
    const { db } = database;
    const row = await insertSessionRun(db);
    const lift = await refuseRunsEnding(db, "cancelled", "40001");
    const { recorder, settled } = recorderOn(db, 100);
    const cancelled = bareCompletion("cancelled", "cancelled by a test");
    const { state } = await recorder.record(row, { seq: 1, publicSeq: 1 }, cancelled, []);
    expect(state).toBe("pending");
    expect(recorder.unstored()).toEqual([row.id]);
    await lift();

    await Promise.all([recorder.storeNow(row.id), recorder.storeNow(row.id), recorder.flush()]);
    expect(settled).toEqual([[row.id, true]]);
    expect(recorder.unstored()).toEqual([]);
    expect((await getRun(db, row.id))?.status).toBe("cancelled");
  });

  // An instance that recorded its end with such a run open would never have it reaped.
  it("counts a completion it gave up on as unstored, for shutdown to leave its run to recovery", async () => {
    const { db } = database;
    const row = await insertSessionRun(db);
    // The outcome refused, and then the failure recorded in its place: it waits, and once tried
    // again at shutdown it is refused for good.
    const lifts = [
      await refuseRunsEnding(db, "interrupted", "22021"),
      await refuseRunsEnding(db, "failed", "22021"),
    ];
    try {
      const { recorder, settled } = recorderOn(db, 100);
      const interrupted = bareCompletion("interrupted", "the server shut down");
      const { state } = await recorder.record(row, { seq: 1, publicSeq: 1 }, interrupted, []);
      expect(state).toBe("pending");
      await recorder.flush();
      expect(settled).toEqual([[row.id, false]]);
      expect(recorder.unstored()).toEqual([row.id]);
    } finally {
      for (const lift of lifts) await lift();
    }
  });
});

// A run that ended while the database refused its completion (here a trigger answers the write
// with a serialization failure, a transient error, as an outage does): the run is over on this
// instance, and once the database takes writes again a client reading the run, or cancelling it
// again, finds it finished as it ended, without waiting for the recorder's next retry.
describe.each(BACKENDS)("a run whose completion waits to be stored, on %s", (backend) => {
  let fake: FakeCli;
  let t: TestApp;
  let server: { url: string; close(): Promise<void> };
  let lift: () => Promise<void>;
  beforeAll(async () => {
    fake = await fakeCli(longRun(30));
    t = await createTestApp(backend, { ...fake.bridgeEnv, AGENT_BRIDGE_DB_OUTAGE_SECONDS: "1" });
    server = await listen(t.app);
    lift = await refuseRunsEnding(t.database.db, "cancelled", "40001");
  });
  afterAll(async () => {
    await server.close();
    await t.close();
    await fake.cleanup();
  });

  it("is answered cancelled by a second cancel and by its view once the database takes it", async () => {
    const api = httpApi(server.url);
    const session = await api.newSession();
    const run = await (
      await api.postMessage(session.id, "work", { Prefer: "respond-async" })
    ).json();
    await SseReader.of(await fetch(`${server.url}/v1/runs/${run.id}/events`)).events(2);
    const cancel = () => fetch(`${server.url}/v1/runs/${run.id}/cancel`, { method: "POST" });

    expect((await cancel()).status).toBe(200);
    expect(await api.json(`/v1/runs/${run.id}`)).toMatchObject({ status: "running" });
    await lift();

    const again = await cancel();
    expect(again.status).toBe(409);
    expect(await again.json()).toMatchObject({
      code: "run_finished",
      detail: `run ${run.id} has already finished (cancelled)`,
    });
    expect(await api.json(`/v1/runs/${run.id}`)).toMatchObject({
      status: "cancelled",
      error: expect.any(String),
    });
  });
});
