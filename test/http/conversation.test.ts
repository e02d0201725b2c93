import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueKey } from "../../src/auth/keys.js";
import { createTestApp, requestAs, type TestApp } from "../support/app.js";
import { appClient, untyped } from "../support/app-client.js";
import { BACKENDS } from "../support/db.js";
import { type FakeCli, fakeCli } from "../support/fake-cli.js";
import { longRun } from "../support/fake-scenarios.js";
import { type Frame, SseReader } from "../support/sse.js";

// GET /v1/sessions/{id}/messages under API keys, with the fake CLI: a key reads its own sessions'
// conversations only, a run still going shows what it has said so far, and a cursor or limit the
// server never gave is a 400 that names it. (What the items hold for real runs of the claude CLI:
// conversation.real.test.ts.)

describe.each(BACKENDS)("a session's conversation under keys on %s", (backend) => {
  let t: TestApp;
  let fake: FakeCli;
  let admin: string;
  let alice: string;
  let bob: string;

  beforeAll(async () => {
    fake = await fakeCli(longRun(30));
    t = await createTestApp(backend, { ...fake.bridgeEnv, AGENT_BRIDGE_AUTH: "keys" });
    const db = t.database.db;
    admin = (await issueKey(db, { name: "admin", admin: true })).key;
    alice = (await issueKey(db, { name: "alice", admin: false })).key;
    bob = (await issueKey(db, { name: "bob", admin: false })).key;
  });
  afterAll(async () => {
    await t.close();
    await fake.cleanup();
  });

  const messages = (key: string, id: string, query: Record<string, string> = {}) =>
    appClient(t.app, key).GET("/v1/sessions/{id}/messages", {
      params: { path: { id }, query },
    });

  it("shows a live run's message and text so far, marked live, to its own key and an admin, and 404 to another key", async () => {
    const client = appClient(t.app, alice);
    const session = await client.createSession();
    const run = await client.sendAsync(session.id, "take your time");
    // The run's text is stored once it has been streamed: wait for it there (in the full view,
    // whose numbering the items' `seq` is).
    const events = SseReader.of(
      await requestAs(t.app, alice, `/v1/runs/${run.id}/events?events=full`),
    );
    let text: Frame | undefined;
    while (!text) {
      const frame = await events.next();
      if (!frame) throw new Error("the run's events ended before its text");
      if (frame.event === "text_delta") text = frame;
    }
    await events.cancel();

    const own = await messages(alice, session.id);
    expect(own.response.status).toBe(200);
    expect(own.data).toEqual({
      data: [
        {
          type: "user_message",
          run_id: run.id,
          seq: 0,
          live: true,
          text: "take your time",
          images: [],
          trigger: "message",
          created_at: run.created_at,
        },
        {
          type: "assistant_text",
          run_id: run.id,
          seq: Number(text.id),
          live: true,
          text: "Working on it",
        },
      ],
      next_cursor: null,
    });
    expect((await messages(admin, session.id)).data).toEqual(own.data);

    const other = await messages(bob, session.id);
    expect(other.response.status).toBe(404);
    expect(other.response.headers.get("content-type")).toContain("application/problem+json");
    expect(other.error).toMatchObject({ status: 404, code: "session_not_found" });

    await client.cancelRun(run.id);
    const ended = (await messages(alice, session.id)).data?.data ?? [];
    expect(ended.map((item) => [item.type, item.live])).toEqual([
      ["user_message", false],
      ["assistant_text", false],
      ["run_end", false],
    ]);
    expect(ended.at(-1)).toMatchObject({ status: "cancelled", error_code: "cancelled" });
  });

  it("answers a cursor the server never gave with 400 invalid_cursor, and a bad limit with 400 naming it", async () => {
    const session = await appClient(t.app, alice).createSession();
    const forged = [
      "not-base64!",
      Buffer.from("[]").toString("base64url"),
      // A list's cursor (sessions, runs) is not a position in a conversation.
      Buffer.from(JSON.stringify({ t: new Date().toISOString(), id: session.id })).toString(
        "base64url",
      ),
      Buffer.from(JSON.stringify({ t: "0000-01-01T00:00:00Z", id: session.id, s: 1 })).toString(
        "base64url",
      ),
      Buffer.from(
        JSON.stringify({ t: new Date().toISOString(), id: session.id, s: 2 ** 40 }),
      ).toString("base64url"),
    ];
    for (const cursor of forged) {
      const { response, error } = await messages(alice, session.id, { cursor });
      expect(response.status).toBe(400);
      expect(response.headers.get("content-type")).toContain("application/problem+json");
      expect(error).toMatchObject({ code: "invalid_cursor" });
    }
    const { response, error } = await untyped(
      requestAs(t.app, alice, `/v1/sessions/${session.id}/messages?limit=101`),
    );
    expect(response.status).toBe(400);
    expect(JSON.stringify(error)).toContain("limit");
    const hostile = await untyped(
      requestAs(t.app, alice, `/v1/sessions/${session.id}/messages?cursor=%00`),
    );
    expect(hostile.response.status).toBe(400);
  });
});
