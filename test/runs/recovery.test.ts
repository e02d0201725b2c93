import { spawn } from "node:child_process";
import { and, eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bootId, groupAlive, terminateGroup } from "../../src/process/groups.js";
import { markRunning, setRunPgid } from "../../src/store/run-lifecycle.js";
import { getRun } from "../../src/store/runs.js";
import { feedEvents } from "../../src/store/schema.js";
import { createTestApp, type TestApp } from "../support/app.js";
import { BACKENDS, insertSessionRun } from "../support/db.js";

// Start-up recovery acts on the process group a dead server recorded only when that number can
// still be its CLI's: recorded in this boot of the machine.

/** A detached process group that stands in for a CLI left running. */
function orphanGroup(): number {
  const child = spawn("sleep", ["30"], { detached: true, stdio: "ignore" });
  child.unref();
  if (!child.pid) throw new Error("sleep did not start");
  return child.pid;
}

describe.each(BACKENDS)("recovering runs on %s", (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp(backend);
  });
  afterAll(() => t.close());

  /**
   * A run a server left running, written in one transaction: queued and nobody's, it would be
   * there for this app's instance to claim at its lease tick.
   */
  async function unfinishedRun(pgid: number, boot: string | null) {
    return t.database.db.transaction(async (tx) => {
      const run = await insertSessionRun(tx, "left behind");
      await markRunning(tx, run.id, new Date());
      await setRunPgid(tx, run.id, pgid, boot);
      return run;
    });
  }

  it("keeps closed a run that another instance closed before its own marked it running", async () => {
    const db = t.database.db;
    const run = await insertSessionRun(db, "closed meanwhile");
    await t.deps.runs.reap(null);
    expect((await getRun(db, run.id))?.status).toBe("interrupted");
    // Its instance, late past its lease, goes on with its start.
    await markRunning(db, run.id, new Date());
    expect((await getRun(db, run.id))?.status).toBe("interrupted");
    const started = await db
      .select()
      .from(feedEvents)
      .where(and(eq(feedEvents.runId, run.id), eq(feedEvents.type, "run_started")));
    expect(started).toEqual([]);
  });

  it("kills the group a run of this boot left, and closes the run as interrupted", async () => {
    const pgid = orphanGroup();
    const run = await unfinishedRun(pgid, bootId());
    await t.deps.runs.reap(null);
    expect(await groupAlive(pgid)).toBe(false);
    expect((await getRun(t.database.db, run.id))?.status).toBe("interrupted");
  });

  it("leaves alone a group number recorded in another boot, which may be anyone's now", async () => {
    const pgid = orphanGroup();
    try {
      const run = await unfinishedRun(pgid, "a-boot-before-the-reboot");
      await t.deps.runs.reap(null);
      expect(await groupAlive(pgid)).toBe(true);
      expect((await getRun(t.database.db, run.id))?.status).toBe("interrupted");
    } finally {
      await terminateGroup(pgid, 100);
    }
  });
});
