import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BridgeEvent } from "../../src/events.js";
import { silentLogger } from "../../src/log.js";
import { LogWriter } from "../../src/runs/log-writer.js";
import { RunLog } from "../../src/runs/run-log.js";
import { readStoredLog } from "../../src/runs/stored-log.js";
import type { Database } from "../../src/store/db.js";
import { runEventBatches } from "../../src/store/schema.js";
import { BACKENDS, insertSessionRun, openTestDatabase, type TestDatabase } from "../support/db.js";

// The writer stores the logs of all runs in progress, one statement per turn of the event loop.

const delta = (text: string): BridgeEvent => ({ type: "text_delta", text });

async function stored(db: Database, runId: string) {
  const texts: string[] = [];
  for await (const batch of readStoredLog(db, runId, "full", 0)) {
    for (const e of batch) texts.push((JSON.parse(e.json) as { text: string }).text);
  }
  return texts;
}

describe.each(BACKENDS)("the log writer on %s", (backend) => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await openTestDatabase(backend);
  });
  afterAll(() => database.destroy());

  it("stores what several runs append in a turn in one statement, each log in order", async () => {
    const { db } = database;
    let statements = 0;
    // Raw statements go through `execute`, or prepared through the session's `prepareQuery`.
    const session = new Proxy(db._.session, {
      get(target, key, receiver) {
        if (key === "prepareQuery") statements++;
        return Reflect.get(target, key, receiver);
      },
    });
    const counting = new Proxy(db, {
      get(target, key, receiver) {
        if (key === "execute") statements++;
        if (key === "_") return { ...target._, session };
        return Reflect.get(target, key, receiver);
      },
    });
    const writer = new LogWriter(counting, silentLogger, 1000);
    const logs = await Promise.all(
      [1, 2, 3].map(async () => new RunLog(writer, (await insertSessionRun(db)).id, db)),
    );
    for (let i = 0; i < 100; i++) for (const log of logs) log.append(delta(`${log.runId}:${i}`));
    await Promise.all(logs.map((log) => log.drain()));
    expect(statements).toBe(1);
    for (const log of logs) {
      expect(await stored(db, log.runId)).toEqual(
        Array.from({ length: 100 }, (_, i) => `${log.runId}:${i}`),
      );
    }
  });

  it("a batch the database refuses fails only its own log", async () => {
    const { db } = database;
    const writer = new LogWriter(db, silentLogger, 1000);
    const good = new RunLog(writer, (await insertSessionRun(db)).id, db);
    // No such run: the foreign key refuses its batch.
    const bad = new RunLog(writer, randomUUID(), db);
    good.append(delta("kept"));
    bad.append(delta("refused"));
    await expect(bad.drain()).rejects.toThrow();
    await good.drain();
    expect(await stored(db, good.runId)).toEqual(["kept"]);
    const rows = await db.select().from(runEventBatches);
    expect(rows.some((row) => row.runId === bad.runId)).toBe(false);
  });
});
