import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { followElsewhere } from "../../src/cluster/remote-follower.js";
import type { BridgeEvent } from "../../src/events.js";
import { openDatabase } from "../../src/store/db.js";
import { appendEvents, sequenced } from "../../src/store/events.js";
import { insertSessionRun } from "../support/db.js";
import { listeningDoorbell } from "../support/instances.js";
import { ownPostgresAvailable, startOwnPostgres } from "../support/pg-server.js";
import { createDatabaseOn } from "../support/postgres-databases.js";

// The doorbell's LISTEN connection through a stop of the Postgres server (its own, started here).

describe.runIf(ownPostgresAvailable)("the doorbell through a database outage", () => {
  it("listens again once the database is back (3 s down): what is stored then reaches the follower with no lease tick", async () => {
    const pg = await startOwnPostgres();
    try {
      const url = await createDatabaseOn(pg.url, `bell_${randomBytes(4).toString("hex")}`);
      const database = await openDatabase({ kind: "postgres", url });
      const { db } = database;
      const run = await insertSessionRun(db);
      const doorbell = await listeningDoorbell(database);
      const store = (seq: number, event: BridgeEvent) =>
        appendEvents(
          db,
          [{ runId: run.id, events: [sequenced(event, seq, seq)], lastPublicSeq: seq }],
          { ring: true },
        );
      const follower = followElsewhere(db, doorbell, run.id, "full", 0);
      const first = follower.next();
      await store(1, { type: "text_delta", text: "one" });
      expect((await first).value?.map((e: { seq: number }) => e.seq)).toEqual([1]);
      pg.stop();
      await new Promise((r) => setTimeout(r, 3000));
      pg.start();
      const second = follower.next();
      // Stored after the outage, rung; the follower must hear it without any lease tick.
      for (;;) {
        try {
          await store(2, { type: "text_delta", text: "two" });
          break;
        } catch {
          await new Promise((r) => setTimeout(r, 200));
        }
      }
      expect((await second).value?.map((e: { seq: number }) => e.seq)).toEqual([2]);
      doorbell.stop();
      await database.close();
    } finally {
      pg.destroy();
    }
  }, 60_000);
});
