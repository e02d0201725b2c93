import { randomUUID } from "node:crypto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildSweeper } from "../../src/app.js";
import { issueKey } from "../../src/auth/keys.js";
import { openDatabase } from "../../src/store/db.js";
import { appendFeed, listFeed, pruneFeed } from "../../src/store/feed.js";
import { createTestApp, listen, type TestApp } from "../support/app.js";
import { BACKENDS } from "../support/db.js";
import { createServerDatabase } from "../support/postgres-databases.js";
import { waitUntil } from "../support/process.js";
import { codeBlocks, docSection } from "../support/readme.js";
import { type Frame, SseReader } from "../support/sse.js";

// GET /v1/events on both databases, without agents: who sees what, where a stream starts and
// resumes, the reset after a prune, the filters and the input it refuses; and the order of ids
// under concurrent writers (Postgres).

const data = (frame: Frame | undefined) => frame?.data as Record<string, unknown>;

describe.each(BACKENDS)("the live feed on %s", (backend) => {
  let t: TestApp;
  let server: { url: string; close(): Promise<void> };
  let alice: string;
  let aliceId: string;
  let bob: string;
  let admin: string;

  beforeAll(async () => {
    t = await createTestApp(backend, { AGENT_BRIDGE_AUTH: "keys" });
    await t.deps.doorbell.start();
    server = await listen(t.app);
    const issued = await issueKey(t.database.db, { name: "alice", admin: false });
    alice = issued.key;
    aliceId = issued.row.id;
    bob = (await issueKey(t.database.db, { name: "bob", admin: false })).key;
    admin = (await issueKey(t.database.db, { name: "admin", admin: true })).key;
  });
  afterAll(async () => {
    await server.close();
    t.deps.doorbell.stop();
    await t.close();
  });

  const call = (key: string, path: string, init: RequestInit = {}) =>
    fetch(`${server.url}${path}`, {
      ...init,
      headers: {
        Authorization: `Bearer ${key}`,
        "Content-Type": "application/json",
        ...(init.headers as Record<string, string>),
      },
    });
  const newSession = async (key: string, title = "t") =>
    (await (
      await call(key, "/v1/sessions", { method: "POST", body: JSON.stringify({ title }) })
    ).json()) as {
      id: string;
    };
  const feed = async (key: string, query = "", headers: Record<string, string> = {}) => {
    const res = await call(key, `/v1/events${query}`, { headers });
    expect(res.status).toBe(200);
    return { res, sse: SseReader.of(res) };
  };

  it("a key's live stream shows its own sessions' events as they happen, an admin's everyone's", async () => {
    const mine = await feed(alice);
    const all = await feed(admin);
    // Starting from now: an `id:` line alone says where.
    const start = await mine.sse.next();
    expect(start?.raw).toBe(`id: ${mine.res.headers.get("x-feed-position")}\n\n`);
    await all.sse.next();
    const bobs = await newSession(bob, "bob's");
    const alices = await newSession(alice, "alice's");
    await call(alice, `/v1/sessions/${alices.id}`, { method: "DELETE" });
    const seen = await mine.sse.events(2);
    expect(seen.map((f) => [f.event, data(f).session_id])).toEqual([
      ["session_created", alices.id],
      ["session_deleted", alices.id],
    ]);
    expect(data(seen[0])).toEqual({
      type: "session_created",
      at: expect.any(String),
      key_id: aliceId,
      session_id: alices.id,
      agent: "claude",
      title: "alice's",
    });
    expect(Number(seen[1]?.id)).toBeGreaterThan(Number(seen[0]?.id));
    const admins = await all.sse.events(3);
    expect(admins.map((f) => [f.event, data(f).session_id])).toEqual([
      ["session_created", bobs.id],
      ["session_created", alices.id],
      ["session_deleted", alices.id],
    ]);
    await mine.sse.cancel();
    await all.sse.cancel();
  });

  it("docs/conversations.md's example has the wire format and fields of a real stream", async () => {
    const [example] = codeBlocks(await docSection("docs/conversations.md", "Live feed"), "text");
    const documented = (example ?? "")
      .split("\n\n")
      .map((block) => block.split("\n").filter((line) => !line.startsWith("$")))
      .filter((lines) => lines.length > 0 && lines[0] !== "");
    const session = await newSession(alice, "docs");
    const { sse } = await feed(alice, `?after=0&follow=false&session_id=${session.id}`);
    const [real] = await sse.events();
    const [doc] = documented;
    // The same lines in the same order, and the same fields in the same order.
    expect(doc?.map((line) => line.split(":")[0])).toEqual(["id", "event", "data"]);
    expect(
      real?.raw
        .split("\n")
        .filter(Boolean)
        .map((line) => line.split(":")[0]),
    ).toEqual(["id", "event", "data"]);
    expect(doc?.[1]).toBe(`event: ${real?.event}`);
    const docData = JSON.parse(doc?.[2]?.slice("data: ".length) ?? "{}");
    expect(Object.keys(docData)).toEqual(Object.keys(data(real)));
    const finished = JSON.parse(documented[1]?.[2]?.slice("data: ".length) ?? "{}");
    expect(Object.keys(finished)).toEqual([
      "type",
      "at",
      "key_id",
      "session_id",
      "run_id",
      "status",
      "cost_usd",
      "duration_ms",
    ]);
  });

  it("resuming with Last-Event-ID (or ?after=) gets exactly what came after, once, in order", async () => {
    const first = await newSession(alice);
    const { sse } = await feed(alice, `?session_id=${first.id}&after=0&follow=false`);
    const [created] = await sse.events();
    expect(created?.event).toBe("session_created");
    const second = await newSession(alice);
    const third = await newSession(alice);
    const resumes: { headers: Record<string, string>; query: string }[] = [
      { headers: { "Last-Event-ID": created?.id ?? "" }, query: "?follow=false" },
      { headers: {}, query: `?after=${created?.id}&follow=false` },
    ];
    for (const resume of resumes) {
      const again = await feed(alice, resume.query, resume.headers);
      const frames = await again.sse.events();
      const sessions = frames.map((f) => data(f).session_id);
      expect(sessions.filter((id) => id === second.id || id === third.id)).toEqual([
        second.id,
        third.id,
      ]);
      expect(sessions).not.toContain(first.id);
    }
  });

  it("filters by session and by type", async () => {
    const a = await newSession(alice);
    const b = await newSession(alice);
    await call(alice, `/v1/sessions/${b.id}`, { method: "DELETE" });
    const bySession = await feed(alice, `?after=0&follow=false&session_id=${a.id}`);
    expect((await bySession.sse.events()).map((f) => [f.event, data(f).session_id])).toEqual([
      ["session_created", a.id],
    ]);
    const byType = await feed(alice, "?after=0&follow=false&types=session_deleted");
    const deleted = (await byType.sse.events()).map((f) => data(f).session_id);
    expect(deleted).toContain(b.id);
    expect(deleted).not.toContain(a.id);
  });

  it("refuses what is not a position, a session id or a type with a 400 naming the field", async () => {
    for (const [query, headers, field] of [
      ["?types=run_finished,nope", {}, "types"],
      ["?session_id=nope", {}, "session_id"],
      ["?after=-1", {}, "after"],
      ["?after=99999999999999999999", {}, "after"],
      ["?types=run_finished%00", {}, "types"],
      ["?after=%ED%A0%80", {}, "after"],
      ["", { "Last-Event-ID": "x1" }, "last-event-id"],
    ] as const) {
      const res = await call(alice, `/v1/events${query}`, { headers });
      expect(res.status, query).toBe(400);
      const problem = (await res.json()) as { errors: { field?: string; name?: string }[] };
      expect(JSON.stringify(problem)).toContain(field);
    }
  });

  it("a position the sweep pruned past starts with a feed_reset, then everything the feed holds", async () => {
    const before = await newSession(alice);
    const { sse } = await feed(alice, `?after=0&follow=false&session_id=${before.id}`);
    const [old] = await sse.events();
    const kept = await newSession(alice);
    // The sweep, two days on: everything stored so far is past the 24 h the feed keeps, but for
    // the newest event, which stays to say where the feed begins.
    const report = await buildSweeper(t.deps).sweep(new Date(Date.now() + 2 * 86_400_000));
    expect(report.prunedFeedEvents).toBeGreaterThan(0);
    expect(await pruneFeed(t.database.db, new Date(Date.now() + 3 * 86_400_000))).toBe(0);
    const again = await feed(alice, "?follow=false", {
      "Last-Event-ID": String(Number(old?.id) - 1),
    });
    const frames = await again.sse.events();
    expect(frames[0]?.event).toBe("feed_reset");
    expect(data(frames[0])).toMatchObject({ type: "feed_reset", after: Number(old?.id) - 1 });
    expect(frames.slice(1).map((f) => [f.event, data(f).session_id])).toEqual([
      ["session_created", kept.id],
    ]);
    // Resuming at the reset's id, or at the newest event, is no reset.
    const resumed = await feed(alice, "?follow=false", { "Last-Event-ID": frames[0]?.id ?? "" });
    expect((await resumed.sse.events()).map((f) => f.event)).toEqual(["session_created"]);
    // An id the feed never reached is one it cannot resume from either.
    const future = await feed(alice, "?follow=false", { "Last-Event-ID": "9007199254740991" });
    expect((await future.sse.events())[0]?.event).toBe("feed_reset");
  });
});

describe.skipIf(!BACKENDS.includes("postgres"))("feed ids under concurrent writers", () => {
  it("an append waits for an earlier one to commit, so ids commit in order and a reader never skips one", async () => {
    const { url, drop } = await createServerDatabase({ migrated: true });
    const one = await openDatabase({ kind: "postgres", url, poolSize: 2 });
    const two = await openDatabase({ kind: "postgres", url, poolSize: 2 });
    try {
      const sessionId = randomUUID();
      const entry = (n: number) => ({
        type: "session_deleted" as const,
        sessionId,
        ownerKeyId: null,
        data: { n },
      });
      let commitFirst: () => void = () => {};
      const held = new Promise<void>((resolve) => {
        commitFirst = resolve;
      });
      let appended: () => void = () => {};
      const firstAppended = new Promise<void>((resolve) => {
        appended = resolve;
      });
      const first = one.db.transaction(async (tx) => {
        await appendFeed(tx, [entry(1)]);
        appended();
        await held;
      });
      await firstAppended;
      const second = two.db.transaction((tx) => appendFeed(tx, [entry(2)]));
      // The second waits on the feed's lock while the first is open.
      await waitUntil(
        async () => {
          const result = await one.db.execute(
            sql`select count(*)::int as n from pg_locks where locktype = 'advisory' and not granted`,
          );
          return ((result as unknown as { n: number }[])[0]?.n ?? 0) > 0;
        },
        "the second append waiting for the feed's lock",
        10_000,
      );
      expect(await listFeed(two.db, 0, {}, 10)).toEqual([]);
      commitFirst();
      await first;
      await second;
      const rows = await listFeed(two.db, 0, {}, 10);
      expect(rows.map((r) => JSON.parse(r.data).n)).toEqual([1, 2]);
      expect(rows[1]?.id).toBeGreaterThan(rows[0]?.id ?? 0);
    } finally {
      await one.close();
      await two.close();
      await drop();
    }
  });
});
