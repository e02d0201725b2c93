import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildDeps, createApp } from "../../src/app.js";
import { createClient } from "../../src/client/index.js";
import { loadConfig } from "../../src/config.js";
import { type BridgeEvent, bareCompletion } from "../../src/events.js";
import { createLogger } from "../../src/log.js";
import type { Database } from "../../src/store/db.js";
import { appendEvents, type SequencedEvent, sequenced } from "../../src/store/events.js";
import { createTestApp, listen, type TestApp } from "../support/app.js";
import { BACKENDS, insertSessionRun, openTestDatabase } from "../support/db.js";
import { SseReader } from "../support/sse.js";

// GET /v1/runs/{id}/events over real HTTP: where a replay may start (a position the log can
// hold, nothing else), and how a stream that fails mid-way ends (an `error` frame, never a
// made-up completion, never the database's words).

/** A finished run stored as the run manager would have: `run_started`, then one batch per list. */
async function storedRun(db: Database, rest: BridgeEvent[][]): Promise<string> {
  const run = await insertSessionRun(db);
  const batches: BridgeEvent[][] = [
    [
      {
        type: "run_started",
        run_id: run.id,
        session_id: run.sessionId,
        trigger: "message",
        queued_ms: 0,
      },
    ],
    ...rest,
  ];
  let seq = 0;
  const stored = batches.map((events) => {
    const entries: SequencedEvent[] = events.map((e) => sequenced(e, ++seq, seq));
    return { runId: run.id, events: entries, lastPublicSeq: seq };
  });
  for (const batch of stored) await appendEvents(db, [batch]);
  return run.id;
}

const text = (t: string): BridgeEvent => ({ type: "text_delta", text: t });

/** GET /v1/runs/{id}/events through the typed client, over the socket, its body unread. */
function eventsOver(
  url: string,
  runId: string,
  params: {
    query?: { after?: number; follow?: "true" | "false" };
    header?: { "last-event-id"?: string };
  } = {},
) {
  return createClient({ baseUrl: url }).GET("/v1/runs/{id}/events", {
    params: { path: { id: runId }, ...params },
    parseAs: "stream",
  });
}

describe.each(BACKENDS)("where a replay starts, on %s", (backend) => {
  let t: TestApp;
  let server: { url: string; close(): Promise<void> };
  let runId: string;

  beforeAll(async () => {
    t = await createTestApp(backend);
    server = await listen(t.app);
    runId = await storedRun(t.database.db, [[text("two")], [bareCompletion("failed", "over")]]);
  });
  afterAll(async () => {
    await server.close();
    await t.close();
  });

  const events = (from: { lastEventId?: string; after?: number }) =>
    eventsOver(server.url, runId, {
      ...(from.after !== undefined ? { query: { after: from.after } } : {}),
      ...(from.lastEventId !== undefined ? { header: { "last-event-id": from.lastEventId } } : {}),
    });

  it("replays after a Last-Event-ID, and after ?after=", async () => {
    for (const { response: res } of [
      await events({ lastEventId: "1" }),
      await events({ after: 1 }),
    ]) {
      expect(res.status).toBe(200);
      const frames = await SseReader.of(res).events();
      expect(frames.map((f) => [f.id, f.event])).toEqual([
        ["2", "text_delta"],
        ["3", "completion"],
      ]);
    }
  });

  it("takes the largest position the log can hold (2147483647): nothing after it, and closes", async () => {
    for (const { response: res } of [
      await events({ lastEventId: "2147483647" }),
      await events({ after: 2147483647 }),
    ]) {
      expect(res.status).toBe(200);
      expect(await res.text()).toBe("");
    }
  });

  const invalid = ["2147483648", "99999999999999999999", "-1", "1.5", "1e3", "0x10", "abc", ""];

  it.each(invalid)("Last-Event-ID %j: 400 naming the header", async (value) => {
    const { error, response } = await events({ lastEventId: value });
    expect(response.status).toBe(400);
    expect(response.headers.get("content-type")).toBe("application/problem+json");
    expect(error).toMatchObject({
      code: "validation_failed",
      errors: [
        {
          location: "header",
          path: "last-event-id",
          message: "expected an event id: a whole number from 0 to 2147483647",
        },
      ],
    });
  });

  it.each(invalid)("?after=%s: 400 naming the parameter", async (value) => {
    // Raw: the contract's types take a number, and these are what they forbid.
    const res = await fetch(
      `${server.url}/v1/runs/${runId}/events?after=${encodeURIComponent(value)}`,
    );
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({
      code: "validation_failed",
      errors: [
        {
          location: "query",
          path: "after",
          message: "expected an event id: a whole number from 0 to 2147483647",
        },
      ],
    });
  });
});

describe.each(BACKENDS)("?follow=false, on %s", (backend) => {
  let t: TestApp;
  let server: { url: string; close(): Promise<void> };
  let runId: string;

  beforeAll(async () => {
    t = await createTestApp(backend);
    server = await listen(t.app);
    // A run going on: its log holds no completion yet.
    runId = await storedRun(t.database.db, [[text("two")], [text("three")]]);
  });
  afterAll(async () => {
    await server.close();
    await t.close();
  });

  const stored = (after?: number) =>
    eventsOver(server.url, runId, {
      query: { follow: "false", ...(after !== undefined ? { after } : {}) },
    });

  it("replays what a run going on has stored so far, then closes without a completion", async () => {
    const { response: res } = await stored();
    expect(res.status).toBe(200);
    const frames = await SseReader.of(res).events();
    expect(frames.map((f) => [f.id, f.event])).toEqual([
      ["1", "run_started"],
      ["2", "text_delta"],
      ["3", "text_delta"],
    ]);
    const rest = await SseReader.of((await stored(2)).response).events();
    expect(rest.map((f) => [f.id, f.data])).toEqual([["3", text("three")]]);
  });

  it("?follow=maybe: 400 naming the parameter", async () => {
    // Raw: the contract's types take "true" or "false" alone.
    const res = await fetch(`${server.url}/v1/runs/${runId}/events?follow=maybe`);
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({
      code: "validation_failed",
      errors: [{ location: "query", path: "follow", message: "expected true or false" }],
    });
  });
});

describe.each(BACKENDS)("a stream that fails mid-way, on %s", (backend) => {
  it("ends with an error frame telling the client to reconnect: no completion, no SQL, the cause logged", async () => {
    const logged: string[] = [];
    const config = loadConfig({
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      AGENT_BRIDGE_AUTH: "none",
    });
    const database = await openTestDatabase(backend);
    const deps = buildDeps(
      config,
      database,
      createLogger("error", {}, (l) => logged.push(l)),
    );
    const server = await listen(createApp(deps));
    try {
      // The replay's first page is 8 batches: run_started and 7 of 4 MiB, far more than the
      // socket and the stream's buffer hold (measured: 2 such frames ahead of a client that
      // stopped reading). So while the client has read one frame, the server waits inside that
      // page, and it asks for the next page on a closed database.
      const big = text("x".repeat(4 * 1024 * 1024));
      const runId = await storedRun(database.db, [
        ...Array.from({ length: 7 }, () => [big]),
        [text("on the second page")],
        [bareCompletion("failed", "end")],
      ]);

      const { data, response } = await eventsOver(server.url, runId);
      expect(response.status).toBe(200);
      // Read as raw bytes (a frame-by-frame reader would scan each 4 MiB frame once per chunk).
      const reader = (data as ReadableStream<Uint8Array>).getReader();
      const decoder = new TextDecoder();
      let wire = "";
      while (!wire.includes("\n\n")) wire += decoder.decode((await reader.read()).value);
      expect(wire).toMatch(/^id: 1\nevent: run_started\n/);
      await database.close();
      for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) {
        wire += decoder.decode(chunk.value, { stream: true });
      }

      const frames = wire.split("\n\n");
      expect(frames.pop()).toBe("");
      const heads = frames.map((frame) => frame.split("\n").slice(0, 2).join(" "));
      expect(heads).toEqual([
        "id: 1 event: run_started",
        ...[2, 3, 4, 5, 6, 7, 8].map((id) => `id: ${id} event: text_delta`),
        expect.stringMatching(/^event: error /),
      ]);
      expect(`${frames.at(-1)}\n\n`).toBe(
        'event: error\ndata: {"code":"stream_failed","message":"the event stream failed on the server; reconnect with Last-Event-ID to resume after the last event received"}\n\n',
      );
      expect(frames[7]).toBe(`id: 8\nevent: text_delta\ndata: ${JSON.stringify(big)}`);
      const log = logged.find((line) => line.includes("event stream failed"));
      expect(log).toContain(runId);
    } finally {
      await server.close();
      await deps.runs.shutdown(0);
      await database.destroy();
    }
  });
});
