import { randomUUID } from "node:crypto";
import { and, eq, isNull } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { claimQueuedRun, insertRun } from "../../src/store/runs.js";
import { runs } from "../../src/store/schema.js";
import { createSession } from "../../src/store/sessions.js";
import { BACKENDS, openTestDatabase, type TestDatabase } from "../support/db.js";

// Claiming a queued run that no instance owns takes exactly one, the oldest, however many wait.

describe.each(BACKENDS)("claiming queued runs on %s", (backend) => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await openTestDatabase(backend);
  });
  afterAll(() => database.destroy());

  async function unownedRun(): Promise<string> {
    const session = await createSession(database.db, {
      ownerKeyId: null,
      workDir: null,
      title: null,
      agent: "claude",
      permissionMode: "acceptEdits",
      model: null,
      effort: "high",
      systemPrompt: null,
      worktree: false,
      metadata: {},
    });
    const run = await insertRun(database.db, {
      sessionId: session.id,
      instanceId: null,
      handover: {},
      agent: "claude",
      trigger: "message",
      prompt: "hi",
      systemPrompt: null,
      idempotencyKey: null,
      requestHash: null,
    });
    return run.id;
  }

  it("takes the oldest one alone, leaving the others for any instance", async () => {
    const ids = [];
    for (let i = 0; i < 5; i++) ids.push(await unownedRun());
    const me = randomUUID();
    const claimed = await claimQueuedRun(database.db, me, "host");
    expect(claimed?.run.id).toBe(ids[0]);
    const mine = await database.db.select().from(runs).where(eq(runs.instanceId, me));
    expect(mine.map((r) => r.id)).toEqual([ids[0]]);
    const left = await database.db
      .select()
      .from(runs)
      .where(and(eq(runs.status, "queued"), isNull(runs.instanceId)));
    expect(left).toHaveLength(4);
  });
});
