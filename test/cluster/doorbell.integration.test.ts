import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { followElsewhere } from "../../src/cluster/remote-follower.js";
import { type BridgeEvent, bareCompletion } from "../../src/events.js";
import { returnedRows } from "../../src/store/db.js";
import { appendEvents, sequenced } from "../../src/store/events.js";
import { insertSessionRun, openTestDatabase } from "../support/db.js";
import { listeningDoorbell } from "../support/instances.js";

// The doorbell's LISTEN connection on the real Postgres server: a NOTIFY sent while it is down is
// lost, and the follower reads what it missed when the connection listens again.

describe.skipIf(!process.env.TEST_DATABASE_URL)("the doorbell on Postgres", () => {
  it("a follower whose LISTEN connection was dropped catches up when it listens again, and gets every event", async () => {
    const database = await openTestDatabase("postgres");
    const { db } = database;
    try {
      const run = await insertSessionRun(db);
      const doorbell = await listeningDoorbell(database);
      const store = (seq: number, event: BridgeEvent, ring: boolean) =>
        appendEvents(
          db,
          [{ runId: run.id, events: [sequenced(event, seq, seq)], lastPublicSeq: seq }],
          { ring },
        );
      const seqs = async (next: Promise<IteratorResult<{ seq: number }[]>>) =>
        (await next).value?.map((e: { seq: number }) => e.seq);
      const follower = followElsewhere(db, doorbell, run.id, "full", 0);

      const first = follower.next();
      await store(1, { type: "text_delta", text: "one" }, true);
      expect(await seqs(first)).toEqual([1]);

      // A batch whose ring is never heard (as one stored while the connection is down), then the
      // connection is dropped.
      const second = follower.next();
      await store(2, { type: "text_delta", text: "two" }, false);
      const [listener] = returnedRows<{ pid: number }>(
        await db.execute(sql`select pid from pg_stat_activity
          where datname = current_database() and query ilike 'listen%'`),
      );
      expect(listener).toBeDefined();
      await db.execute(sql`select pg_terminate_backend(${listener?.pid})`);
      expect(await seqs(second)).toEqual([2]);

      // Listening again: rings are heard.
      const third = follower.next();
      await store(3, { type: "text_delta", text: "three" }, true);
      expect(await seqs(third)).toEqual([3]);
      const last = follower.next();
      await store(4, bareCompletion("failed", "over"), true);
      expect(await seqs(last)).toEqual([4]);
      expect((await follower.next()).done).toBe(true);
      doorbell.stop();
    } finally {
      await database.destroy();
    }
  });
});
