import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDatabase } from "../../src/store/db.js";
import { createTestAppOn, type TestApp } from "../support/app.js";
import { type FakeCli, fakeCli } from "../support/fake-cli.js";
import { heldReply } from "../support/fake-scenarios.js";
import { createServerDatabase } from "../support/postgres-databases.js";
import { SseReader } from "../support/sse.js";

// On Postgres a run's events are written on a connection of their own (DatabaseHandle.eventsDb):
// a burst of requests that holds every connection of the pool (fifty messages admitted at once,
// each transaction waiting for its key's lock) does not keep the running runs' events from their
// clients. Nor does the model gateway's reading of the run's metered calls at its end keep back
// the text that came in the same read as its outcome (gateway-access.ts): the test app's CLI has
// a credential, so its calls go through the gateway. What the real CLI cannot be made to do on
// demand: wait, mid-run, until the test has taken the pool.

const POOL_SIZE = 2;

describe.skipIf(!process.env.TEST_DATABASE_URL)(
  "the event logs' own connection, on postgres",
  () => {
    let t: TestApp;
    let fake: FakeCli;
    let dir: string;

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), "agent-bridge-events-connection-"));
      fake = await fakeCli(heldReply(join(dir, "go"), ["through ", "the pool"]), "claude");
      const { url, drop } = await createServerDatabase({ migrated: true });
      const handle = await openDatabase({ kind: "postgres", url, poolSize: POOL_SIZE });
      const database = {
        ...handle,
        url,
        destroy: async () => {
          await handle.close();
          await drop();
        },
      };
      t = createTestAppOn(database, fake.bridgeEnv);
    });
    afterAll(async () => {
      await t?.close();
      await fake.cleanup();
      rmSync(dir, { recursive: true, force: true });
    });

    it("streams a running run's text while every connection of the pool is held", async () => {
      const session = await (await t.app.request("/v1/sessions", { method: "POST" })).json();
      const res = await t.app.request(`/v1/sessions/${session.id}/messages`, {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
        body: JSON.stringify({ text: "go on" }),
      });
      expect(res.status).toBe(200);
      const reader = SseReader.of(res);
      await fake.waitForMark("working");

      // Transactions that hold each connection of the pool until the text has come; the run's
      // end (its text and its result in one write) is recorded once they let go.
      let release = () => {};
      const released = new Promise<void>((resolve) => {
        release = resolve;
      });
      let holding = 0;
      let allHeld = () => {};
      const held = new Promise<void>((resolve) => {
        allHeld = resolve;
      });
      const holders = Array.from({ length: POOL_SIZE }, () =>
        t.database.db.transaction(async (tx) => {
          await tx.execute(sql`select 1`);
          if (++holding === POOL_SIZE) allHeld();
          await released;
        }),
      );
      await held;

      try {
        writeFileSync(join(dir, "go"), "");
        const delta = (await reader.until("text_delta")).at(-1)?.data;
        expect(delta).toMatchObject({ text: "through " });
      } finally {
        release();
        await Promise.all(holders);
      }
      const completion = (await reader.until("completion")).at(-1)?.data;
      expect(completion).toMatchObject({ status: "succeeded" });
    });
  },
);
