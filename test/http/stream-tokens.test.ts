import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueKey } from "../../src/auth/keys.js";
import { issueStreamToken, STREAM_TOKEN_TTL_SECONDS } from "../../src/auth/stream-tokens.js";
import { createLogger } from "../../src/log.js";
import { openDatabase } from "../../src/store/db.js";
import { revokeKey } from "../../src/store/keys.js";
import { createTestAppOn, type TestApp } from "../support/app.js";
import { appClient } from "../support/app-client.js";
import { BACKENDS, openTestDatabase } from "../support/db.js";
import { type FakeCli, fakeCli } from "../support/fake-cli.js";
import { streamedReply } from "../support/fake-scenarios.js";
import { SseReader } from "../support/sse.js";

// Stream tokens: what lets a browser's EventSource (no Authorization header) follow one run.

describe.each(BACKENDS)("stream tokens on %s", (backend) => {
  let t: TestApp;
  let fake: FakeCli;
  let alice: string;
  let aliceId: string;
  let bob: string;
  const logs: string[] = [];

  beforeAll(async () => {
    fake = await fakeCli(streamedReply(["Hello", " there"]));
    // Every log line, at every level, to check that no token reaches the log.
    t = createTestAppOn(
      await openTestDatabase(backend),
      { ...fake.bridgeEnv, AGENT_BRIDGE_AUTH: "keys" },
      createLogger("debug", {}, (line) => logs.push(line)),
    );
    const issued = await issueKey(t.database.db, { name: "alice", admin: false });
    alice = issued.key;
    aliceId = issued.row.id;
    bob = (await issueKey(t.database.db, { name: "bob", admin: false })).key;
  });
  afterAll(async () => {
    await t.close();
    await fake.cleanup();
  });

  const as = (key: string) => appClient(t.app, key);
  // Without a key: the token is all a browser's EventSource has.
  const anonymous = () => appClient(t.app);

  /** A finished run of a new session of `key` (answered 200, or `send` throws). */
  async function finishedRun(key: string): Promise<string> {
    const session = await as(key).createSession();
    return (await as(key).send(session.id, "hi")).run.id;
  }

  async function tokenFor(key: string, runId: string) {
    const { data, response } = await as(key).POST("/v1/runs/{id}/stream-token", {
      params: { path: { id: runId } },
    });
    expect(response.status).toBe(201);
    return data as NonNullable<typeof data>;
  }

  /** The run's events, with `token` in place of a key. */
  const eventsWith = (runId: string, token: string, after?: number) =>
    anonymous().GET("/v1/runs/{id}/events", {
      params: { path: { id: runId }, query: { token, ...(after ? { after } : {}) } },
      parseAs: "stream",
    });

  /**
   * A request with no key, refused 401; its detail. Raw, as the token is tried where the contract
   * takes none (other routes, other methods), and links are followed as the server wrote them.
   */
  async function refused(path: string, init: RequestInit = {}): Promise<string> {
    const res = await t.app.request(path, init);
    expect(res.status, path).toBe(401);
    const problem = await res.json();
    expect(problem.code).toBe("unauthorized");
    return problem.detail;
  }

  it("follows its run's events without Authorization, for five minutes", async () => {
    const runId = await finishedRun(alice);
    const before = Date.now();
    const { token, expires_at, events_url } = await tokenFor(alice, runId);
    const after = Date.now();
    expect(events_url).toBe(`/v1/runs/${runId}/events?token=${token}`);
    // In whole seconds: the second the token was made in, plus its lifetime.
    const inTtl = (ms: number) => (Math.floor(ms / 1000) + STREAM_TOKEN_TTL_SECONDS) * 1000;
    expect(Date.parse(expires_at)).toBeGreaterThanOrEqual(inTtl(before));
    expect(Date.parse(expires_at)).toBeLessThanOrEqual(inTtl(after));

    const { response: res } = await eventsWith(runId, token);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const frames = await SseReader.of(res).events(100);
    expect(frames.map((f) => f.event)).toEqual([
      "run_started",
      "text_delta",
      "text_delta",
      "completion",
    ]);
    // Last-Event-ID and the other query parameters still work beside it.
    const { response: resumed } = await eventsWith(runId, token, 3);
    expect((await SseReader.of(resumed).events(100)).map((f) => f.event)).toEqual(["completion"]);
  });

  it("is refused for another run, another route, another method", async () => {
    const runId = await finishedRun(alice);
    const other = await finishedRun(alice);
    const { token } = await tokenFor(alice, runId);
    expect(await refused(`/v1/runs/${other}/events?token=${token}`)).toBe(
      "this stream token is not for this run",
    );
    for (const path of [
      `/v1/runs/${runId}?token=${token}`,
      `/v1/sessions?token=${token}`,
      `/v1/runs?token=${token}`,
    ]) {
      expect(await refused(path)).toMatch(/only for GET \/v1\/runs\/\{id\}\/events/);
    }
    await refused(`/v1/runs/${runId}/cancel?token=${token}`, { method: "POST" });
    await refused(`/v1/runs/${runId}/stream-token?token=${token}`, { method: "POST" });
  });

  it("is refused once expired, or when any part of it was changed", async () => {
    const runId = await finishedRun(alice);
    const events = (token: string) => `/v1/runs/${runId}/events?token=${token}`;
    const stale = await issueStreamToken(
      t.database.db,
      runId,
      aliceId,
      Date.now() - STREAM_TOKEN_TTL_SECONDS * 1000 - 1000,
    );
    expect(await refused(events(stale.token))).toBe("stream token expired");

    const { token } = await tokenFor(alice, runId);
    const [expires, key, signature = ""] = token.split(".");
    const flipped = `${signature.slice(0, -2)}${signature.at(-2) === "A" ? "B" : "A"}${signature.at(-1)}`;
    for (const tampered of [
      `${Number(expires) + 3600}.${key}.${signature}`,
      `${expires}.${key}.${flipped}`,
      `${expires}.00000000-0000-0000-0000-000000000000.${signature}`,
    ]) {
      expect(await refused(events(tampered))).toBe("this stream token is not for this run");
    }
    expect(await refused(events("nonsense"))).toBe("malformed stream token");
  });

  it("is refused when spelled otherwise than it was made, even where it decodes to the same signature", async () => {
    const runId = await finishedRun(alice);
    const events = (token: string) => `/v1/runs/${runId}/events?token=${token}`;
    const { token } = await tokenFor(alice, runId);
    const [expires, key, signature = ""] = token.split(".");
    // The last of 43 characters holds the last 4 bits of the signature's 32 bytes; the 2 low bits
    // of its value are padding, 0 as written. Setting one gives another spelling of the same bytes.
    const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const last = alphabet.indexOf(signature.at(-1) ?? "");
    expect(last % 4).toBe(0);
    const respelled = `${signature.slice(0, -1)}${alphabet[last + 1]}`;
    expect(Buffer.from(respelled, "base64url")).toEqual(Buffer.from(signature, "base64url"));
    expect(await refused(events(`${expires}.${key}.${respelled}`))).toBe(
      "this stream token is not for this run",
    );
    // The expiry with a leading zero is the same number.
    expect(await refused(events(`0${expires}.${key}.${signature}`))).toBe("malformed stream token");
    // As made, it is good.
    expect((await eventsWith(runId, token)).response.status).toBe(200);
  });

  it("is made only for a run the key may see, and ends with the key that made it", async () => {
    const runId = await finishedRun(alice);
    const { response } = await as(bob).POST("/v1/runs/{id}/stream-token", {
      params: { path: { id: runId } },
    });
    expect(response.status).toBe(404);

    const carol = await issueKey(t.database.db, { name: "carol", admin: false });
    const carolRun = await finishedRun(carol.key);
    const { token, events_url } = await tokenFor(carol.key, carolRun);
    expect((await eventsWith(carolRun, token)).response.status).toBe(200);
    await revokeKey(t.database.db, carol.row.id);
    expect(await refused(events_url)).toBe("the key this stream token was made with is revoked");
  });

  it.runIf(backend === "postgres")(
    "is good at another instance on the same database (the secret is shared there)",
    async () => {
      const handle = await openDatabase({ kind: "postgres", url: t.database.url as string });
      const other = createTestAppOn(
        { ...handle, destroy: () => handle.close() },
        { ...fake.bridgeEnv, AGENT_BRIDGE_AUTH: "keys" },
      );
      try {
        const runId = await finishedRun(alice);
        const { events_url } = await tokenFor(alice, runId);
        const res = await other.app.request(events_url);
        expect(res.status).toBe(200);
        expect((await SseReader.of(res).events(100)).at(-1)?.event).toBe("completion");
      } finally {
        await other.close();
      }
    },
  );

  it("never reaches the log", async () => {
    const runId = await finishedRun(alice);
    const { token, events_url } = await tokenFor(alice, runId);
    await (await t.app.request(events_url)).text();
    await refused(`/v1/runs/${runId}?token=${token}`);
    const requests = logs.filter((line) => line.includes('"msg":"request"'));
    expect(requests.some((line) => line.includes(`/v1/runs/${runId}/events`))).toBe(true);
    expect(logs.filter((line) => line.includes(token))).toEqual([]);
    expect(logs.filter((line) => line.includes(token.split(".").at(-1) ?? token))).toEqual([]);
  });
});
