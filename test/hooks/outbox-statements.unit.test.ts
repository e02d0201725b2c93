import { describe, expect, it } from "vitest";
import { callbackHook } from "../../src/hooks/callback-hook.js";
import { CallbackOutbox } from "../../src/hooks/outbox.js";
import { replyHook } from "../../src/hooks/reply-hook.js";
import { ReplyOutbox } from "../../src/hooks/reply-outbox.js";
import { silentLogger } from "../../src/log.js";
import type { RunTransactionHook } from "../../src/runs/recording.js";
import type { Database } from "../../src/store/db.js";
import type { EventBatch } from "../../src/store/events.js";

// A run's progress, and its completion, reach an outbox's table only for a run that joined its hook
// (or one whose hooks are not known here): on the embedded database each statement holds the
// server's thread.

/** A database that counts what is asked of it and answers nothing (every statement fails). */
function countingDatabase() {
  const asked = { count: 0 };
  const db = new Proxy(
    {},
    {
      get() {
        asked.count++;
        throw new Error("no database here");
      },
    },
  ) as Database;
  return { db, asked };
}

const started: EventBatch = {
  runId: "00000000-0000-4000-8000-000000000001",
  lastPublicSeq: 2,
  events: [
    { seq: 1, publicSeq: 1, type: "run_started", json: '{"type":"run_started"}' },
    { seq: 2, publicSeq: 2, type: "status", json: '{"type":"status","tool_name":"Bash"}' },
  ],
};

const outboxOptions = {
  logger: silentLogger,
  timeoutMs: 1000,
  pollMs: 1000,
  allow: [],
  maxAttempts: 1,
  backoffMinMs: 1,
  backoffMaxMs: 1,
};

function outboxOn(db: Database) {
  return new ReplyOutbox({ ...outboxOptions, db, progressMs: 0 });
}

describe("a run's progress in the reply outbox", () => {
  it("costs no statement for a run its replies did not join", async () => {
    const { db, asked } = countingDatabase();
    const other: RunTransactionHook = { ...replyHook, joins: () => false };
    await outboxOn(db).progressed(started, [other]);
    expect(asked.count).toBe(0);
  });

  it("is recorded for a run its replies joined, and for one whose hooks are not known here", async () => {
    for (const joined of [[replyHook], undefined]) {
      const { db, asked } = countingDatabase();
      // The statement fails here: the outbox logs it and the run goes on.
      await outboxOn(db).progressed(started, joined);
      expect(asked.count).toBeGreaterThan(0);
    }
  });
});

describe("a run's completion in the outboxes", () => {
  const outboxes = [
    {
      name: "callback",
      hook: callbackHook,
      on: (db: Database) => new CallbackOutbox({ ...outboxOptions, db, buildBody: async () => "" }),
    },
    { name: "reply", hook: replyHook, on: outboxOn },
  ];

  it("costs no statement in an outbox whose hook the run did not join", async () => {
    const other: RunTransactionHook = { ...replyHook, joins: () => false };
    for (const { name, on } of outboxes) {
      const { db, asked } = countingDatabase();
      await on(db).completed([other]);
      expect(asked.count, name).toBe(0);
    }
  });

  it("looks for what is due in an outbox whose hook the run joined, or when its hooks are not known here", async () => {
    for (const { name, hook, on } of outboxes) {
      for (const joined of [[hook], undefined]) {
        const { db, asked } = countingDatabase();
        // The look fails here: the outbox logs it.
        await on(db).completed(joined);
        expect(asked.count, name).toBeGreaterThan(0);
      }
    }
  });
});
