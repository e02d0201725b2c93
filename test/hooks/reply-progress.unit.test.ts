import { describe, expect, it } from "vitest";
import { replyHook } from "../../src/hooks/reply-hook.js";
import { ReplyOutbox } from "../../src/hooks/reply-outbox.js";
import { silentLogger } from "../../src/log.js";
import type { RunTransactionHook } from "../../src/runs/recording.js";
import type { Database } from "../../src/store/db.js";
import type { EventBatch } from "../../src/store/events.js";

// A run's progress reaches the reply outbox's table only for a run its replies joined (or one whose
// hooks are not known here): on the embedded database each statement holds the server's thread.

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

function outboxOn(db: Database) {
  return new ReplyOutbox({
    db,
    logger: silentLogger,
    timeoutMs: 1000,
    pollMs: 1000,
    progressMs: 0,
    allow: [],
    maxAttempts: 1,
    backoffMinMs: 1,
    backoffMaxMs: 1,
  });
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
