import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type BridgeEvent, bareCompletion } from "../../src/events.js";
import { silentLogger } from "../../src/log.js";
import { LogWriter } from "../../src/runs/log-writer.js";
import { MAX_BACKLOG, RunLog } from "../../src/runs/run-log.js";
import type { Database } from "../../src/store/db.js";
import { type LogView, sequenced } from "../../src/store/events.js";
import { runEventBatches } from "../../src/store/schema.js";
import { BACKENDS, insertSessionRun, openTestDatabase, type TestDatabase } from "../support/db.js";

// A run's live log keeps only its latest events in memory; subscribers further behind read the
// database, and every subscriber sees each event once, in order, whatever its position.

/** Every third event is internal (`reasoning`): the two views number differently. */
const event = (i: number): BridgeEvent =>
  i % 3 === 0 ? { type: "reasoning", text: `r${i}` } : { type: "text_delta", text: `t${i}` };

/** The database, counting the reads made through it. */
function countingReads(db: Database) {
  const counter = { reads: 0 };
  const proxy = new Proxy(db, {
    get(target, key, receiver) {
      if (key === "select") counter.reads++;
      return Reflect.get(target, key, receiver);
    },
  });
  return { db: proxy, counter };
}

describe.each(BACKENDS)("a run's live log on %s", (backend) => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await openTestDatabase(backend);
  });
  afterAll(() => database.destroy());

  /** A log keeping 10 events a view, holding `n` stored events. */
  async function logWith(n: number) {
    const { db, counter } = countingReads(database.db);
    const log = new RunLog(
      new LogWriter(database.db, silentLogger, 1000),
      (await insertSessionRun(database.db)).id,
      db,
      10,
    );
    for (let i = 1; i <= n; i++) {
      log.append(event(i));
      // Several batches, as a run streaming for a while makes.
      if (i % 7 === 0) await log.drain();
    }
    await log.drain();
    return { log, counter };
  }

  /** Reads the subscription until `count` events came; returns their positions in the view. */
  async function read(log: RunLog, view: LogView, after: number, count: number) {
    const positions: number[] = [];
    for await (const batch of log.subscribe(view, after)) {
      for (const e of batch) positions.push((view === "full" ? e.seq : e.publicSeq) ?? 0);
      if (positions.length >= count) break;
    }
    return positions;
  }

  const range = (from: number, to: number) =>
    Array.from({ length: to - from + 1 }, (_, i) => from + i);

  it("serves a subscriber within the kept events from memory", async () => {
    const { log, counter } = await logWith(100);
    expect(await read(log, "full", 95, 5)).toEqual(range(96, 100));
    expect(counter.reads).toBe(0);
  });

  it("keeps the whole of a batch bigger than what memory keeps for the subscribers at its start", async () => {
    const { log, counter } = await logWith(30);
    // 18 events stored as one batch, against 10 to 20 kept a view.
    for (let i = 31; i <= 48; i++) log.append(event(i));
    await log.drain();
    expect(await read(log, "full", 30, 18)).toEqual(range(31, 48));
    expect(counter.reads).toBe(0);
  });

  it("reads from the database what memory no longer keeps, then goes on from memory", async () => {
    const { log, counter } = await logWith(100);
    expect(await read(log, "full", 0, 100)).toEqual(range(1, 100));
    expect(counter.reads).toBeGreaterThan(0);
    // 100 events, one in three internal: 67 public ones.
    expect(await read(log, "public", 20, 47)).toEqual(range(21, 67));
  });

  it("brings a subscriber that fell behind back to the live events, through the completion", async () => {
    const { log } = await logWith(30);
    const positions: number[] = [];
    let appended = 30;
    for await (const batch of log.subscribe("full", 0)) {
      for (const e of batch) positions.push(e.seq);
      // While this subscriber reads, the run goes on far beyond what memory keeps.
      if (appended < 100) {
        for (; appended < 100; appended++) log.append(event(appended + 1));
        await log.drain();
      } else if (positions.at(-1) === 100) {
        const at = log.completionPosition();
        log.close(sequenced(bareCompletion("cancelled", "enough"), at.seq, at.publicSeq));
      }
    }
    expect(positions).toEqual(range(1, 101));
  });

  it("holds the run back while the database is far behind, until it has caught up", async () => {
    const { db } = database;
    const runId = (await insertSessionRun(db)).id;
    // The log's table is locked until the test lets the writes through.
    let open = () => {};
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    let locked = () => {};
    const lock = db.transaction(async (tx) => {
      await tx.execute(sql`lock table ${runEventBatches} in exclusive mode`);
      locked();
      await gate;
    });
    await new Promise<void>((resolve) => {
      locked = resolve;
    });
    const log = new RunLog(new LogWriter(db, silentLogger, 1000), runId, db);
    for (let i = 1; i < MAX_BACKLOG; i++) log.append(event(i));
    await log.keepPace();
    log.append(event(MAX_BACKLOG));
    let caughtUp = false;
    const pace = log.keepPace().then(() => {
      caughtUp = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(caughtUp).toBe(false);
    open();
    await lock;
    await pace;
    expect(await read(log, "full", MAX_BACKLOG - 1, 1)).toEqual([MAX_BACKLOG]);
  });
});
