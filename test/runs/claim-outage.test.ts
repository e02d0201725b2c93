import { eq } from "drizzle-orm";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { toHandover } from "../../src/runs/handover.js";
import { NO_RUN_OPTIONS } from "../../src/runs/message.js";
import { type DatabaseHandle, openDatabase } from "../../src/store/db.js";
import { runs } from "../../src/store/schema.js";
import { createTestAppOn, type TestApp } from "../support/app.js";
import { createServerDatabase, insertSessionRun } from "../support/db.js";
import { type FakeCli, fakeCli } from "../support/fake-cli.js";
import { type PgProxy, startPgProxy } from "../support/pg-proxy.js";
import { waitUntil } from "../support/process.js";
import { result, systemInit } from "../support/stream-json-lines.js";

// An instance claims a queued run from the shared queue, and the database goes away before the
// run starts, for longer than the outage bound: the run can be neither started nor given back.
// It was left this instance's, queued, for good, and once the instance stopped (its end
// recorded) no other instance would claim or reap it. It is given back when the database is back.

describe.skipIf(!process.env.TEST_DATABASE_URL)("a claimed run the database took away", () => {
  let fake: FakeCli;
  let direct: DatabaseHandle;
  let proxy: PgProxy;
  let t: TestApp;
  beforeAll(async () => {
    fake = await fakeCli({ steps: [{ emit: systemInit() }, { emit: result({ result: "ran" }) }] });
  });
  afterAll(() => fake.cleanup());

  /** The app through the proxy, on a new database that the test also reads directly. */
  async function instance() {
    const { url, drop } = await createServerDatabase({ migrated: true });
    proxy = await startPgProxy(url);
    const viaProxy = await openDatabase({ kind: "postgres", url: proxy.url, poolSize: 4 });
    direct = await openDatabase({ kind: "postgres", url, poolSize: 2 });
    t = createTestAppOn(
      {
        ...viaProxy,
        url: proxy.url,
        destroy: async () => {
          await viaProxy.close();
          await direct.close();
          proxy.close();
          await drop();
        },
      },
      { ...fake.bridgeEnv, AGENT_BRIDGE_DB_OUTAGE_SECONDS: "1" },
    );
  }
  afterEach(async () => {
    proxy.up();
    await t.close();
  });

  const row = async (id: string) =>
    (
      await direct.db
        .select({ status: runs.status, instanceId: runs.instanceId })
        .from(runs)
        .where(eq(runs.id, id))
    )[0];

  const CLAIM = /for update skip locked/;

  /** A queued run nobody owns, claimed by the app as the database goes down; the claim fails. */
  async function claimDuringOutage(): Promise<string> {
    const { id } = await insertSessionRun(direct.db);
    // As a message written for any instance has it: what the message set for the run.
    await direct.db
      .update(runs)
      .set({ handover: toHandover({ options: NO_RUN_OPTIONS, resumeAt: null }) })
      .where(eq(runs.id, id));
    proxy.downAfterAnswer(CLAIM);
    await t.deps.runs.claimWork();
    // Claimed, and neither started nor given back.
    expect(await row(id)).toEqual({ status: "queued", instanceId: t.deps.lease.id });
    proxy.up();
    return id;
  }

  it("is given back at the next claim once the database is back, and runs", async () => {
    await instance();
    const id = await claimDuringOutage();
    await t.deps.runs.claimWork();
    // Started: its row says so once the run has marked it (not awaited by the claim).
    const started = async () => ["running", "succeeded"].includes((await row(id))?.status ?? "");
    await waitUntil(started, "the run given back, claimed again and started", 10_000);
  });

  it("is given back when the instance stops, before it records its end", async () => {
    await instance();
    const id = await claimDuringOutage();
    await t.deps.runs.shutdown(0);
    expect(await row(id)).toEqual({ status: "queued", instanceId: null });
  });
});
