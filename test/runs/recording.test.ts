import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bareCompletion } from "../../src/events.js";
import { silentLogger } from "../../src/log.js";
import { CompletionRecorder } from "../../src/runs/recording.js";
import { getCompletionEvent } from "../../src/store/events.js";
import { getRun } from "../../src/store/runs.js";
import { BACKENDS, insertSessionRun, openTestDatabase, type TestDatabase } from "../support/db.js";

// Recording a run's end when the database refuses its outcome: the run is recorded as failed,
// keeping its spend, with the database's code and none of its text; never a rejection.

describe.each(BACKENDS)("the completion recorder on %s", (backend) => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await openTestDatabase(backend);
    // A real refusal: the database rejects any run row that would end `succeeded`.
    await database.db.execute(sql`create function test_refuse_success() returns trigger
      language plpgsql as $$ begin
        if new.status = 'succeeded' then raise exception 'test: refused' using errcode = '22021'; end if;
        return new;
      end $$`);
    await database.db.execute(sql`create trigger test_refuse_success before update on runs
      for each row execute function test_refuse_success()`);
  });
  afterAll(() => database.destroy());

  it("records an outcome the database refuses as a failure with the spend, and stores that", async () => {
    const { db } = database;
    const row = await insertSessionRun(db);
    const settled: string[] = [];
    const recorder = new CompletionRecorder({
      db,
      logger: silentLogger,
      outageBoundMs: 1000,
      onSettled: (runId) => settled.push(runId),
    });
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
});
