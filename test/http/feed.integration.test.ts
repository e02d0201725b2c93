import { randomUUID } from "node:crypto";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildSweeper } from "../../src/app.js";
import { issueKey } from "../../src/auth/keys.js";
import { FeedWatch } from "../../src/cluster/doorbell.js";
import { feedStart, followFeed } from "../../src/cluster/feed.js";
import { type DatabaseHandle, openDatabase } from "../../src/store/db.js";
import {
  appendFeed,
  FEED_BEGINNING,
  feedPending,
  feedPositionText,
  listFeed,
  positionOf,
  pruneFeed,
} from "../../src/store/feed.js";
import { type FeedEventRow, feedEvents } from "../../src/store/schema.js";
import { until } from "../hooks/support.js";
import { createTestApp, listen, type TestApp } from "../support/app.js";
import { BACKENDS } from "../support/db.js";
import { byPosition } from "../support/feed.js";
import { createServerDatabase } from "../support/postgres-databases.js";
import { codeBlocks, docSection } from "../support/readme.js";
import { type Frame, SseReader } from "../support/sse.js";

// GET /v1/events on both databases, without agents: who sees what, where a stream starts and
// resumes, the reset after a prune, the filters and the input it refuses; and the order of
// positions under concurrent writers (Postgres).

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
    expect(byPosition(seen[1]?.id ?? "", seen[0]?.id ?? "")).toBe(1);
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
      ["?after=18446744073709551616-1", {}, "after"],
      ["?after=1-9223372036854775808", {}, "after"],
      ["?after=1-2-3", {}, "after"],
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
    // the newest event, which stays to say where the feed begins. An event is pruned once settled,
    // below every transaction open on the whole Postgres server (other databases' too): swept
    // until the old one is gone.
    const twoDaysOn = new Date(Date.now() + 2 * 86_400_000);
    let pruned = 0;
    await until(
      async () => {
        pruned += (await buildSweeper(t.deps).sweep(twoDaysOn)).prunedFeedEvents;
        const left = await t.database.db
          .select({ id: feedEvents.id })
          .from(feedEvents)
          .where(eq(feedEvents.sessionId, before.id));
        return left.length === 0;
      },
      20_000,
      "the old event's prune",
    );
    expect(pruned).toBeGreaterThan(0);
    // Pruned again, a day later still: the newest event stays however often the sweep comes (what
    // each prune takes depends on the transactions open on the whole server, other databases'
    // too, which hold back which events are settled).
    await pruneFeed(t.database.db, new Date(Date.now() + 3 * 86_400_000));
    // Just before the first event the stream showed: older than the feed now holds.
    const [oldXid, oldId] = (old?.id ?? "").split("-");
    const beforeOld = `${oldXid}-${Number(oldId) - 1}`;
    const again = await feed(alice, "?follow=false", { "Last-Event-ID": beforeOld });
    const frames = await again.sse.events();
    expect(frames[0]?.event).toBe("feed_reset");
    expect(data(frames[0])).toMatchObject({ type: "feed_reset", after: beforeOld });
    expect(frames.slice(1).map((f) => [f.event, data(f).session_id])).toEqual([
      ["session_created", kept.id],
    ]);
    // Resuming at the reset's id, or at the newest event, is no reset.
    const resumed = await feed(alice, "?follow=false", { "Last-Event-ID": frames[0]?.id ?? "" });
    expect((await resumed.sse.events()).map((f) => f.event)).toEqual(["session_created"]);
    // A position the feed never reached is one it cannot resume from either (xids are 64-bit).
    const future = await feed(alice, "?follow=false", {
      "Last-Event-ID": "18446744073709551615-1",
    });
    expect((await future.sse.events())[0]?.event).toBe("feed_reset");
    // `0` (or an empty position) is everything the feed holds: no reset.
    for (const everything of ["?after=0&follow=false", "?after=&follow=false"]) {
      const all = await feed(alice, everything);
      expect((await all.sse.events())[0]?.event, everything).not.toBe("feed_reset");
    }
  });
});

describe.skipIf(!BACKENDS.includes("postgres"))("feed positions under concurrent writers", () => {
  let url: string;
  let drop: () => Promise<void>;
  let one: DatabaseHandle;
  let two: DatabaseHandle;
  beforeAll(async () => {
    ({ url, drop } = await createServerDatabase({ migrated: true }));
    one = await openDatabase({ kind: "postgres", url, poolSize: 2 });
    two = await openDatabase({ kind: "postgres", url, poolSize: 2 });
  });
  afterAll(async () => {
    await one?.close();
    await two?.close();
    await drop?.();
  });

  const entry = (sessionId: string, n: number) => ({
    type: "session_deleted" as const,
    sessionId,
    ownerKeyId: null,
    data: { n },
  });
  /** A transaction on `one` that appends, then stays open until `commit` is called. */
  const openAppender = async (sessionId: string, n: number) => {
    let commit: () => void = () => {};
    const held = new Promise<void>((resolve) => {
      commit = resolve;
    });
    let appended: () => void = () => {};
    const done = new Promise<void>((resolve) => {
      appended = resolve;
    });
    const tx = one.db.transaction(async (tx) => {
      await appendFeed(tx, [entry(sessionId, n)]);
      appended();
      await held;
      // Once more after another transaction committed: a higher id, yet read before that one's.
      await appendFeed(tx, [entry(sessionId, n + 10)]);
    });
    await done;
    return {
      commit: async () => {
        commit();
        await tx;
      },
    };
  };
  const numbers = (frames: string[]) =>
    frames.map((f) => JSON.parse(f.split("\ndata: ")[1] ?? "{}").n as number);

  it("a row that commits late is delivered, not skipped: later rows wait for it, then come in (xid, id) order", async () => {
    const sessionId = randomUUID();
    const filter = { sessionId };
    // The first transaction appends (the lower id) and stays open; the second appends after it
    // and commits.
    const first = await openAppender(sessionId, 1);
    await two.db.transaction((tx) => appendFeed(tx, [entry(sessionId, 2)]));
    // The second's row is stored but held back behind the open first: a reader that took it
    // would resume past the first's lower id and never see it.
    const start = await feedStart(two.db, FEED_BEGINNING, filter, new Date());
    expect(start.frames).toEqual([]);
    expect(await listFeed(two.db, FEED_BEGINNING, filter, 10)).toEqual([]);
    expect(await feedPending(two.db, FEED_BEGINNING, filter)).toMatchObject({
      settled: false,
      heldBack: true,
    });
    // A live follower that nothing rings: it looks again while rows are held back.
    const watch = new FeedWatch(() => {});
    const follower = followFeed(two.db, watch, start, filter, true);
    expect((await follower.next()).value).toEqual([]);
    const delivered = follower.next();
    await first.commit();
    // Both transactions' rows, the first's (one appended after the second committed) first.
    const frames: string[] = (await delivered).value ?? [];
    expect(numbers(frames)).toEqual([1, 11, 2]);
    const rows = await listFeed(two.db, FEED_BEGINNING, filter, 10);
    expect(rows.map((r) => JSON.parse(r.data).n)).toEqual([1, 11, 2]);
    expect(rows[2]?.id).toBeLessThan(rows[1]?.id ?? 0);
    expect(frames.map((f) => f.split("\n")[0])).toEqual(
      rows.map((r) => `id: ${feedPositionText(positionOf(r))}`),
    );
    // Resuming after the first's last row gets the second's, whose id is lower.
    const resumed = await listFeed(two.db, positionOf(rows[1] as FeedEventRow), filter, 10);
    expect(resumed.map((r) => JSON.parse(r.data).n)).toEqual([2]);
    await follower.return(undefined);
  });

  it("an append does not wait for another open transaction that appended (a stalled instance holds up no one)", async () => {
    const sessionId = randomUUID();
    const first = await openAppender(sessionId, 1);
    try {
      // Commits while the first is still open: it takes no lock the first holds.
      await two.db.transaction((tx) => appendFeed(tx, [entry(sessionId, 2)]));
      await two.db.transaction((tx) => appendFeed(tx, [entry(sessionId, 3)]));
      const stored = await two.db
        .select()
        .from(feedEvents)
        .where(eq(feedEvents.sessionId, sessionId));
      expect(stored.map((r) => JSON.parse(r.data).n).sort()).toEqual([2, 3]);
    } finally {
      await first.commit();
    }
  });
});
