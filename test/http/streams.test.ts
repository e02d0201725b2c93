import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueKey } from "../../src/auth/keys.js";
import { createClient, type Problem, type Run } from "../../src/client/index.js";
import { agentMatrix } from "../support/agents.js";
import { createTestApp, listen, type TestApp } from "../support/app.js";
import type { FakeCli } from "../support/fake-cli.js";
import { longRun } from "../support/fake-scenarios.js";
import { waitUntil } from "../support/process.js";
import { SseReader } from "../support/sse.js";

// AGENT_BRIDGE_MAX_STREAMS_PER_KEY over real HTTP: a key's open event streams (a message's SSE
// answer and GET …/events alike) are capped, and a stream gives its place back however it ends.

describe.each(agentMatrix)("event streams per key, $agent on $db", (agent) => {
  let t: TestApp;
  let fake: FakeCli;
  let server: { url: string; close(): Promise<void> };
  let alice: string;
  let bob: string;
  const open: SseReader[] = [];

  beforeAll(async () => {
    fake = await agent.fake(longRun(60));
    t = await createTestApp(agent.db, {
      ...fake.bridgeEnv,
      AGENT_BRIDGE_AUTH: "keys",
      AGENT_BRIDGE_MAX_STREAMS_PER_KEY: "2",
      // Every run of these tests goes on at once (none waits in the queue for a slot).
      AGENT_BRIDGE_MAX_CONCURRENT_RUNS: "16",
    });
    server = await listen(t.app);
    alice = (await issueKey(t.database.db, { name: "alice", admin: false })).key;
    bob = (await issueKey(t.database.db, { name: "bob", admin: false })).key;
  });
  afterAll(async () => {
    await Promise.all(open.map((r) => r.cancel().catch(() => {})));
    await server.close();
    await t.close();
    await fake.cleanup();
  });

  /** The typed client over the socket, with `key`. */
  const call = (key: string) => createClient({ baseUrl: server.url, key });
  const newSession = async (key: string): Promise<string> => (await call(key).createSession()).id;
  /** A run of the key that goes on (the fake works for a minute), started without a stream. */
  async function longRunOf(key: string): Promise<string> {
    const { data, response } = await call(key).POST("/v1/sessions/{id}/messages", {
      params: { path: { id: await newSession(key) }, header: { prefer: "respond-async" } },
      body: { text: "work" },
    });
    expect(response.status).toBe(202);
    return (data as Run).id;
  }
  /** Follows the run; the reader is kept (and cancelled at the end) when the stream opened. */
  async function follow(
    key: string,
    runId: string,
  ): Promise<{ status: number; res: Response; problem?: Problem; reader?: SseReader }> {
    const { error, response: res } = await call(key).GET("/v1/runs/{id}/events", {
      params: { path: { id: runId } },
      parseAs: "stream",
    });
    if (res.status !== 200)
      return { status: res.status, res, ...(error ? { problem: error } : {}) };
    const reader = SseReader.of(res);
    open.push(reader);
    // The first frame: the stream is served, its place taken.
    expect((await reader.events(1))[0]?.event).toBe("run_started");
    return { status: 200, res, reader };
  }
  /** A message answered with its run's events (the default). */
  const streamedMessage = async (key: string, sessionId: string, text: string) =>
    call(key).POST("/v1/sessions/{id}/messages", {
      params: { path: { id: sessionId } },
      body: { text },
      parseAs: "stream",
    });

  /** Tries to follow the run until a stream is admitted: the server frees a place on its own time. */
  async function followOnceAdmitted(key: string, runId: string, what: string) {
    await waitUntil(async () => (await follow(key, runId)).status === 200, what);
  }

  it("the third stream of a key with a cap of 2 gets 429 too_many_streams; after one closes, a new one is admitted", async () => {
    const run = await longRunOf(alice);
    const first = await follow(alice, run);
    // A message's own SSE answer counts as one of the key's streams too.
    const { response: message } = await streamedMessage(
      alice,
      await newSession(alice),
      "stream it",
    );
    expect(message.status).toBe(200);
    const messageStream = SseReader.of(message);
    open.push(messageStream);
    expect((await messageStream.events(1))[0]?.event).toBe("run_started");

    const { res: third, problem } = await follow(alice, run);
    expect(third.status).toBe(429);
    expect(third.headers.get("content-type")).toBe("application/problem+json");
    expect(third.headers.get("retry-after")).toBe("5");
    expect(problem?.code).toBe("too_many_streams");
    expect(problem?.detail).toContain("2 event streams open");
    // Another key's streams are its own.
    expect((await follow(bob, await longRunOf(bob))).status).toBe(200);

    await first.reader?.cancel();
    await followOnceAdmitted(alice, run, "a stream admitted once one of the key's streams closed");
  });

  it("a message refused its stream starts no run", async () => {
    const carol = (await issueKey(t.database.db, { name: "carol", admin: false })).key;
    const run = await longRunOf(carol);
    expect((await follow(carol, run)).status).toBe(200);
    expect((await follow(carol, run)).status).toBe(200);
    const session = await newSession(carol);
    // Names the session, as the CLI's start would (FakeCli.startsFor).
    const refused = await streamedMessage(carol, session, `one stream too many in ${session}`);
    expect(refused.response.status).toBe(429);
    expect(refused.error?.code).toBe("too_many_streams");
    const after = await call(carol).getSession(session);
    expect(after.usage.runs).toBe(0);
    expect(await fake.startsFor(session)).toEqual([]);
  });

  it("streams that end with their run's completion give their places back", async () => {
    const dave = (await issueKey(t.database.db, { name: "dave", admin: false })).key;
    const run = await longRunOf(dave);
    const streams = [await follow(dave, run), await follow(dave, run)];
    expect(streams.map((s) => s.status)).toEqual([200, 200]);
    expect((await follow(dave, run)).status).toBe(429);
    const cancelled = await call(dave).POST("/v1/runs/{id}/cancel", {
      params: { path: { id: run } },
    });
    expect(cancelled.response.status).toBe(200);
    // Both streams read to their end (the completion), then the key has its places again.
    for (const { reader } of streams) {
      const rest = (await reader?.events()) ?? [];
      expect(rest.at(-1)?.event).toBe("completion");
    }
    await followOnceAdmitted(dave, run, "a stream admitted after the key's streams ended");
  });
});
