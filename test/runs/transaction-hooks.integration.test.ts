import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bareCompletion } from "../../src/events.js";
import { planReplies } from "../../src/forges/reply-plan.js";
import { callbackHook } from "../../src/hooks/callback-hook.js";
import { replyHook } from "../../src/hooks/reply-hook.js";
import { silentLogger } from "../../src/log.js";
import type { Message } from "../../src/runs/message.js";
import {
  CompletionRecorder,
  type RunTransactionHook,
  recordRun,
} from "../../src/runs/recording.js";
import { callbacksOf } from "../../src/store/callbacks.js";
import { insertHook } from "../../src/store/hooks.js";
import { dueReplies, repliesOf } from "../../src/store/replies.js";
import type { NewRun } from "../../src/store/run-admission.js";
import { runs } from "../../src/store/schema.js";
import { BACKENDS, insertSessionRun, openTestDatabase, type TestDatabase } from "../support/db.js";
import { hookInput } from "../support/hook-input.js";

// Hooks join a run's own transactions: the callback outbox's writes a message's callback with its
// run and makes it due with its completion, each in the same transaction or not at all; the reply
// outbox's does the same with a delivery's replies.

const message: Message = {
  text: "hi",
  systemPrompt: null,
  trigger: "message",
  idempotencyKey: null,
  callback: { url: "http://127.0.0.1:9/callback", secret: "whsec_test" },
};

const refusing: RunTransactionHook = {
  joins: () => true,
  inserted: async () => {
    throw new Error("test: the hook refused");
  },
  completed: async () => {
    throw new Error("test: the hook refused");
  },
};

describe.each(BACKENDS)("run transaction hooks on %s", (backend) => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await openTestDatabase(backend);
  });
  afterAll(() => database.destroy());

  /** A run to write in a fresh session whose queued run is active: this one waits behind it. */
  async function newRun(): Promise<NewRun> {
    const { sessionId } = await insertSessionRun(database.db);
    return {
      sessionId,
      instanceId: null,
      agent: "claude",
      status: "waiting",
      trigger: "message",
      prompt: "hi",
      systemPrompt: null,
      idempotencyKey: null,
      requestHash: null,
    };
  }

  it("writes a message's callback with its run, and neither when a hook's part fails", async () => {
    const { db } = database;
    expect(callbackHook.joins(message)).toBe(true);
    expect(callbackHook.joins({ ...message, callback: null })).toBe(false);

    const run = await recordRun(db, await newRun(), message, [callbackHook], null);
    expect((await callbacksOf(db, [run.id])).get(run.id)).toMatchObject({
      url: message.callback?.url,
      state: "pending",
      nextAttemptAt: null,
    });

    const refused = await newRun();
    await expect(recordRun(db, refused, message, [callbackHook, refusing], null)).rejects.toThrow(
      "test: the hook refused",
    );
    const written = await db.select().from(runs).where(eq(runs.sessionId, refused.sessionId));
    expect(written.map((r) => r.status)).toEqual(["queued"]);
  });

  it("makes a callback due with the completion of a run its hook joined, and only then", async () => {
    const { db } = database;
    const settled: [string, boolean][] = [];
    const recorder = new CompletionRecorder({
      db,
      logger: silentLogger,
      outageBoundMs: 1000,
      onSettled: (runId, stored) => settled.push([runId, stored]),
    });
    const at = { seq: 1, publicSeq: 1 };
    const completion = bareCompletion("cancelled", "cancelled by a client");

    const joined = await recordRun(db, await newRun(), message, [callbackHook], null);
    expect((await recorder.record(joined, at, completion, [callbackHook])).state).toBe("stored");
    expect((await callbacksOf(db, [joined.id])).get(joined.id)?.nextAttemptAt).toBeInstanceOf(Date);

    // Its callback row exists, but the run was recorded without the hook.
    const other = await recordRun(db, await newRun(), message, [callbackHook], null);
    expect((await recorder.record(other, at, completion, [])).state).toBe("stored");
    expect((await callbacksOf(db, [other.id])).get(other.id)?.nextAttemptAt).toBeNull();

    // A hook that refuses takes the whole completion with it: nothing of the run's end is stored.
    const refused = await recordRun(db, await newRun(), message, [callbackHook], null);
    const recorded = await recorder.record(refused, at, completion, [callbackHook, refusing]);
    expect(recorded.state).toBe("pending");
    await recorder.flush();
    expect(settled).toEqual([[refused.id, false]]);
    const [row] = await db.select().from(runs).where(eq(runs.id, refused.id));
    expect(row?.status).toBe("waiting");
    expect((await callbacksOf(db, [refused.id])).get(refused.id)?.nextAttemptAt).toBeNull();
  });

  it("writes a delivery's replies with its run, due only at its start, and says its result with its completion", async () => {
    const { db } = database;
    const hook = await insertHook(
      db,
      hookInput({
        forgeToken: "ghp_x",
        reply: { comment: true, status: "check", reviewComments: true },
      }),
    );
    const planned = planReplies(hook, "pull_request", {
      action: "opened",
      pull_request: { number: 4, head: { sha: "abcdef0" } },
      repository: { full_name: "acme/widgets" },
    });
    const withReplies: Message = { ...message, callback: null, replies: planned };
    expect(replyHook.joins(withReplies)).toBe(true);
    expect(replyHook.joins({ ...withReplies, replies: [] })).toBe(false);

    const run = await recordRun(db, await newRun(), withReplies, [replyHook], null);
    const written = (await repliesOf(db, [run.id])).get(run.id) ?? [];
    expect(written.map((r) => [r.kind, r.phase, r.state, r.nextAttemptAt])).toEqual([
      ["comment", "progress", "pending", null],
      ["check", "progress", "pending", null],
      ["review", "final", "pending", null],
    ]);
    expect(await dueReplies(db, new Date(Date.now() + 60_000), 10)).not.toContain(written[0]?.id);

    const recorder = new CompletionRecorder({
      db,
      logger: silentLogger,
      outageBoundMs: 1000,
      onSettled: () => {},
    });
    const completion = bareCompletion("cancelled", "cancelled by a client");
    await recorder.record(run, { seq: 1, publicSeq: 1 }, completion, [replyHook]);
    const ended = (await repliesOf(db, [run.id])).get(run.id) ?? [];
    expect(ended.map((r) => [r.kind, r.phase, r.state])).toEqual([
      ["comment", "final", "pending"],
      ["check", "final", "pending"],
      ["review", "final", "pending"],
    ]);
    const due = await dueReplies(db, new Date(Date.now() + 1000), 10);
    expect(ended.every((r) => due.includes(r.id))).toBe(true);
  });
});
