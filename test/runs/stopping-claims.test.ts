import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runs } from "../../src/store/schema.js";
import { createTestApp, type TestApp } from "../support/app.js";
import { insertSessionRun } from "../support/db.js";
import { type FakeCli, fakeCli } from "../support/fake-cli.js";
import { result, systemInit } from "../support/stream-json-lines.js";

// An instance told to stop takes no more work from the shared queue. Between the signal and the
// end of its runs its stop has other steps (the sweep, the scheduler); a queued run it claimed
// then started on an instance about to go, and held that stop for the run's whole length.

describe.skipIf(!process.env.TEST_DATABASE_URL)("an instance told to stop, on postgres", () => {
  let fake: FakeCli;
  const apps: TestApp[] = [];
  beforeAll(async () => {
    fake = await fakeCli({ steps: [{ emit: systemInit() }, { emit: result({ result: "ran" }) }] });
  });
  afterAll(async () => {
    for (const t of apps) await t.close();
    await fake.cleanup();
  });

  /** The app on a new database of its own; a queued run no instance owns is inserted per test. */
  async function instance(): Promise<TestApp> {
    const t = await createTestApp("postgres", fake.bridgeEnv);
    apps.push(t);
    return t;
  }

  const ownerOf = async (t: TestApp, id: string) =>
    (
      await t.database.db.select({ instanceId: runs.instanceId }).from(runs).where(eq(runs.id, id))
    )[0]?.instanceId;

  it("claims a queued run that no instance owns while it takes work", async () => {
    const t = await instance();
    const { id } = await insertSessionRun(t.database.db);
    await t.deps.runs.pullWork();
    expect(await ownerOf(t, id)).toBe(t.deps.lease.id);
  });

  // On an instance that never ran a run, so that no run's end starts a claim of its own.
  describe("once told to stop", () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await instance();
    });

    it("gives back the run it was claiming when it was told to stop", async () => {
      const { id } = await insertSessionRun(t.database.db);
      // Its claim's statement is in flight when the stop comes.
      const claiming = t.deps.runs.pullWork();
      t.deps.runs.stopTaking();
      await claiming;
      expect(await ownerOf(t, id)).toBeNull();
    });

    it("claims no queued run once it was told to stop", async () => {
      const { id } = await insertSessionRun(t.database.db);
      await t.deps.runs.pullWork();
      expect(await ownerOf(t, id)).toBeNull();
    });
  });
});
