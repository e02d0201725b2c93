import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueKey } from "../../src/auth/keys.js";
import { createTestApp, type TestApp } from "../support/app.js";
import { appClient } from "../support/app-client.js";
import { BACKENDS } from "../support/db.js";
import { type FakeCli, fakeCli } from "../support/fake-cli.js";
import { longRun } from "../support/fake-scenarios.js";

// Getting a lost run id back: a session names its active run, and its runs are listed newest
// first, paged, to the key that may see them alone.

describe.each(BACKENDS)("listing runs on %s", (backend) => {
  let t: TestApp;
  let fake: FakeCli;
  let alice: string;
  let bob: string;
  let admin: string;

  beforeAll(async () => {
    fake = await fakeCli(longRun(60));
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

  const as = (key: string) => appClient(t.app, key);
  const newSession = (key: string) => as(key).createSession();
  /** Starts a run (it keeps going until cancelled) and returns its id. */
  const startRun = async (key: string, sessionId: string): Promise<string> =>
    (await as(key).sendAsync(sessionId, "work")).id;
  const cancel = (key: string, runId: string) => as(key).cancelRun(runId);

  it("a session names its active run while it goes on, and null once it has ended", async () => {
    const session = await newSession(alice);
    expect((await as(alice).getSession(session.id)).active_run_id).toBeNull();
    const runId = await startRun(alice, session.id);
    expect((await as(alice).getSession(session.id)).active_run_id).toBe(runId);
    const listed = (await as(alice).listSessions()).data.find((s) => s.id === session.id);
    expect(listed?.active_run_id).toBe(runId);
    await cancel(alice, runId);
    expect((await as(alice).getSession(session.id)).active_run_id).toBeNull();
  });

  it("lists a session's runs newest first, a page at a time", async () => {
    const session = await newSession(alice);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const runId = await startRun(alice, session.id);
      ids.unshift(runId);
      if (i < 2) await cancel(alice, runId);
    }
    const all = await as(alice).listRuns({ sessionId: session.id });
    expect(all.data.map((r) => r.id)).toEqual(ids);
    const [newest, ...older] = all.data.map((r) => r.status);
    expect(["queued", "running"]).toContain(newest);
    expect(older).toEqual(["cancelled", "cancelled"]);
    expect(all.data[1]).toMatchObject({
      session_id: session.id,
      prompt: "work",
      events_url: `/v1/runs/${ids[1]}/events`,
      completion: { type: "completion", status: "cancelled", error_code: "cancelled" },
    });
    expect(all.next_cursor).toBeNull();

    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page = await as(alice).listRuns({
        sessionId: session.id,
        limit: 2,
        ...(cursor ? { cursor } : {}),
      });
      seen.push(...page.data.map((r) => r.id));
      cursor = page.next_cursor;
    } while (cursor);
    expect(seen).toEqual(ids);
    await cancel(alice, ids[0] as string);
    // A page reads its runs' parts together; each run is listed as its own view shows it.
    const ended = await as(alice).listRuns({ sessionId: session.id });
    for (const run of ended.data) expect(run).toEqual(await as(alice).getRun(run.id));
  });

  it("shows a key only its own sessions' runs: 404 for another's session, absent from /v1/runs", async () => {
    const session = await newSession(alice);
    const runId = await startRun(alice, session.id);
    await cancel(alice, runId);

    const { error, response } = await as(bob).GET("/v1/sessions/{id}/runs", {
      params: { path: { id: session.id } },
    });
    expect(response.status).toBe(404);
    expect(error?.code).toBe("session_not_found");
    const ids = async (key: string) =>
      (await as(key).listRuns({ limit: 100 })).data.map((r) => r.id);
    expect(await ids(bob)).not.toContain(runId);
    expect(await ids(alice)).toContain(runId);
    expect(await ids(admin)).toContain(runId);
    // Newest first across sessions, too.
    const bobSession = await newSession(bob);
    const bobRun = await startRun(bob, bobSession.id);
    await cancel(bob, bobRun);
    expect((await ids(admin)).slice(0, 2)).toEqual([bobRun, runId]);
  });

  it("refuses a cursor it did not make, and a session id that is not one, with a problem", async () => {
    const session = await newSession(alice);
    const runsOf = (id: string, query: { cursor?: string } = {}) =>
      as(alice).GET("/v1/sessions/{id}/runs", { params: { path: { id }, query } });
    const bad = await runsOf(session.id, { cursor: "nonsense" });
    expect(bad.response.status).toBe(400);
    expect(bad.error?.code).toBe("invalid_cursor");
    const notId = await runsOf("not-a-uuid");
    expect(notId.response.status).toBe(400);
  });
});
