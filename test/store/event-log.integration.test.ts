import { randomUUID } from "node:crypto";
import { eq, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type BridgeEvent, bareCompletion, PUBLIC_EVENT_TYPES } from "../../src/events.js";
import { readStoredLog } from "../../src/runs/stored-log.js";
import type { Database } from "../../src/store/db.js";
import {
  appendEvents,
  getCompletionEvent,
  type LogView,
  lastEventSeqs,
  runText,
  type SequencedEvent,
  sequenced,
} from "../../src/store/events.js";
import { type RunRow, runEventBatches, runs, sessions } from "../../src/store/schema.js";
import { BACKENDS, insertSessionRun, openTestDatabase, type TestDatabase } from "../support/db.js";
import { migrate, type RawDatabase, rawDatabase } from "../support/raw-db.js";

// The run log's stored form: a batch of events to a row, read back in either view from any
// position, and the migration that moved logs stored a row per event into batches.

/** A log of `n` events where every third is internal (`reasoning`), ending with a completion. */
function numberedLog(n: number): SequencedEvent[] {
  const events: SequencedEvent[] = [];
  let publicSeq = 0;
  for (let seq = 1; seq <= n; seq++) {
    const event: BridgeEvent =
      seq === n
        ? bareCompletion("interrupted", "the server stopped")
        : seq % 3 === 0
          ? { type: "reasoning", text: `thought ${seq}\twith a tab\nand a newline` }
          : { type: "text_delta", text: `word ${seq} ` };
    events.push(sequenced(event, seq, PUBLIC_EVENT_TYPES.has(event.type) ? ++publicSeq : null));
  }
  return events;
}

async function store(db: Database, runId: string, log: SequencedEvent[], batchSize: number) {
  let publicSeq = 0;
  for (let i = 0; i < log.length; i += batchSize) {
    const batch = log.slice(i, i + batchSize);
    for (const e of batch) publicSeq = e.publicSeq ?? publicSeq;
    await appendEvents(db, [{ runId, events: batch, lastPublicSeq: publicSeq }]);
  }
}

async function read(db: Database, runId: string, view: LogView, after: number) {
  const out: SequencedEvent[] = [];
  for await (const batch of readStoredLog(db, runId, view, after)) out.push(...batch);
  return out;
}

describe.each(BACKENDS)("the stored run log on %s", (backend) => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await openTestDatabase(backend);
  });
  afterAll(() => database.destroy());

  it("reads back every event after any position, in either view, across many batches", async () => {
    const { db } = database;
    const run = await insertSessionRun(db);
    const log = numberedLog(200);
    // Batches of 7 make 29 rows: more than one page of the reader, with pages of only internal events.
    await store(db, run.id, log, 7);
    const visible = log.filter((e) => e.publicSeq !== null);
    for (const after of [0, 1, 2, 3, 50, 66, 132, 133, 199, 200]) {
      expect(await read(db, run.id, "full", after)).toEqual(log.slice(after));
      expect(await read(db, run.id, "public", after)).toEqual(visible.slice(after));
    }
  });

  // Several runs' batches go in one statement, each column as one array literal (events.ts).
  it("stores several runs' batches in one append, whatever their text holds", async () => {
    const { db } = database;
    const hostile = [
      '"quoted" {braced, with commas}',
      'back\\slash \\"',
      "NULL",
      "",
      "é \u2028 😀",
    ];
    const runs = await Promise.all(hostile.map(() => insertSessionRun(db)));
    const logs = hostile.map((text, i) => [
      sequenced({ type: "text_delta", text }, 1, 1),
      sequenced({ type: "text_delta", text: `${i}` }, 2, 2),
    ]);
    const stored = await appendEvents(
      db,
      runs.map((run, i) => ({ runId: run.id, events: logs[i] ?? [], lastPublicSeq: 2 })),
    );
    expect(stored).toEqual(new Set(runs.map((run) => run.id)));
    for (const [i, run] of runs.entries()) {
      expect(await read(db, run.id, "full", 0)).toEqual(logs[i]);
    }
  });

  // The statement that stores the event naming the agent's session records it (events.ts).
  it("records the agent session ids its batches name on their open runs and their sessions, and none that does not look like one", async () => {
    const { db } = database;
    const [named, plain, closed, odd] = await Promise.all(
      [1, 2, 3, 4].map(() => insertSessionRun(db)),
    );
    if (!named || !plain || !closed || !odd) throw new Error("runs not made");
    await db.update(runs).set({ status: "succeeded" }).where(eq(runs.id, closed.id));
    const batch = (runId: string, agentSessionId?: string) => ({
      runId,
      events: [
        sequenced(
          { type: "session_status", status: "new", agent_session_id: null, model: null },
          1,
          1,
        ),
      ],
      lastPublicSeq: 0,
      ...(agentSessionId ? { agentSessionId } : {}),
    });
    const stored = await appendEvents(db, [
      batch(named.id, "agent-1"),
      batch(plain.id),
      batch(closed.id, "agent-closed"),
      batch(odd.id, "has a space\u0000"),
    ]);
    expect(stored).toEqual(new Set([named.id, plain.id, odd.id]));
    const agentSessions = async (run: RunRow) => {
      const [row] = await db
        .select({ id: runs.agentSessionId })
        .from(runs)
        .where(eq(runs.id, run.id));
      const [session] = await db
        .select({ id: sessions.agentSessionId })
        .from(sessions)
        .where(eq(sessions.id, run.sessionId));
      return [row?.id, session?.id];
    };
    expect(await agentSessions(named)).toEqual(["agent-1", "agent-1"]);
    expect(await agentSessions(plain)).toEqual([null, null]);
    expect(await agentSessions(closed)).toEqual([null, null]);
    expect(await agentSessions(odd)).toEqual([null, null]);
    // One batch alone, as a single busy run's goes.
    await appendEvents(db, [
      {
        ...batch(plain.id, "agent-2"),
        events: [sequenced({ type: "text_delta", text: "x" }, 2, 1)],
        lastPublicSeq: 1,
      },
    ]);
    expect(await agentSessions(plain)).toEqual(["agent-2", "agent-2"]);
    // With the doorbell's ring, as on Postgres the writer stores them.
    const rung = await appendEvents(
      db,
      [
        {
          ...batch(named.id, "agent-3"),
          events: [sequenced({ type: "text_delta", text: "y" }, 2, 2)],
          lastPublicSeq: 2,
        },
      ],
      { ring: true },
    );
    expect(rung).toEqual(new Set([named.id]));
    expect(await agentSessions(named)).toEqual(["agent-3", "agent-3"]);
  });

  // On PGlite a text parameter of 4 096 characters or more goes as its UTF-8 bytes (db.ts).
  it("stores a long batch byte for byte, whatever characters it holds, on either side of the length that sends bytes", async () => {
    const { db } = database;
    const text = 'é \u2028 😀 \ufffd \u0000 \ud800 tab\t "q" ';
    for (const chars of [4000, 4095, 4096, 4097, 300_000]) {
      const run = await insertSessionRun(db);
      const log: SequencedEvent[] = [];
      for (let seq = 1, size = 0; size < chars; seq++) {
        const entry = sequenced({ type: "text_delta", text: `${seq} ${text}` }, seq, seq);
        log.push(entry);
        size += entry.json.length + 20;
      }
      await store(db, run.id, log, log.length);
      expect(await read(db, run.id, "full", 0)).toEqual(log);
    }
  });

  // Consecutive text deltas share a line and store their text alone (events.ts).
  it("keeps text deltas byte for byte through a line of their own, whatever their text, among other events", async () => {
    const { db } = database;
    const run = await insertSessionRun(db);
    const texts = [
      "",
      "tab\there",
      "new\nline",
      '"q" \\',
      "\u2028 é 😀",
      "\ud800",
      "\u0000",
      "text_delta*\t1\t2",
    ];
    const events: BridgeEvent[] = [];
    for (let i = 0; i < 60; i++) {
      events.push({ type: "text_delta", text: texts[i % texts.length] ?? "" });
      if (i % 11 === 10) events.push({ type: "reasoning", text: `r ${i}\tx` });
      if (i % 17 === 16) events.push({ type: "status", message: "working" });
    }
    // One with a field of its own besides its text, or in place of it, is stored as it is.
    events.push({ type: "text_delta", text: "kept", extra: 1 } as BridgeEvent);
    events.push({ type: "text_delta", extra: 2 } as unknown as BridgeEvent);
    events.push({ type: "text_delta", text: "after it" });
    let publicSeq = 0;
    const log = events.map((event, i) =>
      sequenced(event, i + 1, PUBLIC_EVENT_TYPES.has(event.type) ? ++publicSeq : null),
    );
    await store(db, run.id, log, 9);
    const back = await read(db, run.id, "full", 0);
    expect(back).toEqual(log);
    expect(back.map((e) => e.json)).toEqual(events.map((event) => JSON.stringify(event)));
    const visible = log.filter((e) => e.publicSeq !== null);
    for (const after of [1, 5, 9, 10, 33, publicSeq - 1]) {
      expect(await read(db, run.id, "public", after)).toEqual(visible.slice(after));
    }
  });

  it("stores a run of text deltas in little more than their text", async () => {
    const { db } = database;
    const run = await insertSessionRun(db);
    const log = Array.from({ length: 1000 }, (_, i) =>
      sequenced({ type: "text_delta", text: `word ${i} ` }, i + 1, i + 1),
    );
    await store(db, run.id, log, 1000);
    const [row] = await db
      .select({ chars: sql<number>`length(${runEventBatches.events})`.mapWith(Number) })
      .from(runEventBatches)
      .where(eq(runEventBatches.runId, run.id));
    const textChars = log.reduce((n, e) => n + (e.text?.length ?? 0), 0);
    // Each text's JSON string and a tab, and the line's start.
    expect(row?.chars).toBeLessThan(textChars + 1000 + 40);
  });

  it("finds the completion, the last positions and the joined text", async () => {
    const { db } = database;
    const run = await insertSessionRun(db);
    expect(await getCompletionEvent(db, run.id)).toBeUndefined();
    expect(await lastEventSeqs(db, run.id)).toEqual({ seq: 0, publicSeq: 0 });
    const log = numberedLog(10);
    await store(db, run.id, log.slice(0, 9), 4);
    expect(await getCompletionEvent(db, run.id)).toBeUndefined();
    await store(db, run.id, log.slice(9), 1);
    expect(await getCompletionEvent(db, run.id)).toEqual(
      bareCompletion("interrupted", "the server stopped"),
    );
    expect(await lastEventSeqs(db, run.id)).toEqual({ seq: 10, publicSeq: 7 });
    expect(await runText(db, run.id)).toBe("word 1 word 2 word 4 word 5 word 7 word 8 ");
  });
});

/** A session with one queued run, in the tables as they were before migration 0007. */
async function insertOldSessionRun(raw: RawDatabase): Promise<{ id: string }> {
  const sessionId = randomUUID();
  const runId = randomUUID();
  await raw.exec(
    `insert into sessions (id, permission_mode, effort, worktree, created_at, updated_at, last_activity_at)
       values ('${sessionId}', 'acceptEdits', 'high', false, now(), now(), now());
     insert into runs (id, session_id, status, trigger, prompt, created_at)
       values ('${runId}', '${sessionId}', 'queued', 'message', 'hi', now())`,
  );
  return { id: runId };
}

describe.each(BACKENDS)("migrating logs to batches on %s", (backend) => {
  it("keeps every stored event, byte for byte, with both numberings", async () => {
    const raw = await rawDatabase(backend);
    try {
      await migrate(raw, (f) => f < "0007");
      const run = await insertOldSessionRun(raw);
      const empty = await insertOldSessionRun(raw);
      // As the row-per-event log stored them: the type in its column, the rest as JSON text.
      // 2 500 events, the last a completion, and one whose data is empty: `{}`.
      const rows = numberedLog(2500);
      const last = rows.at(-1) as SequencedEvent;
      rows[rows.length - 2] = sequenced(
        { type: "status" } as BridgeEvent,
        last.seq - 1,
        (last.publicSeq ?? 0) - 1,
      );
      const values = rows.map((e) => {
        const { type, ...data } = JSON.parse(e.json) as Record<string, unknown>;
        const json = JSON.stringify(data).replaceAll("'", "''");
        return `('${run.id}', ${e.seq}, ${e.publicSeq ?? "null"}, '${type}', '${json}', now())`;
      });
      await raw.exec(
        `insert into run_events (run_id, seq, public_seq, type, data, created_at) values ${values.join(",")}`,
      );
      await migrate(raw, (f) => f >= "0007");
      // Stored a line per event, as the migration wrote them: the text deltas too (events.ts).
      const whole = rows.map(({ seq, publicSeq, type, json }) => ({ seq, publicSeq, type, json }));
      expect(await read(raw.db, run.id, "full", 0)).toEqual(whole);
      expect(await read(raw.db, run.id, "public", 1000)).toEqual(
        whole.filter((e) => e.publicSeq !== null && e.publicSeq > 1000),
      );
      expect(await lastEventSeqs(raw.db, run.id)).toEqual({ seq: 2500, publicSeq: last.publicSeq });
      expect(await getCompletionEvent(raw.db, run.id)).toEqual(
        bareCompletion("interrupted", "the server stopped"),
      );
      expect(await read(raw.db, empty.id, "full", 0)).toEqual([]);
    } finally {
      await raw.close();
    }
  });
});
