import { rm } from "node:fs/promises";
import { join } from "node:path";
import { eq } from "drizzle-orm";
import { afterEach, describe, expect, it } from "vitest";
import { issueKey } from "../../src/auth/keys.js";
import { type DatabaseHandle, openDatabase } from "../../src/store/db.js";
import { getRun } from "../../src/store/runs.js";
import { instances, worktrees } from "../../src/store/schema.js";
import { saveSessionWorktree } from "../../src/store/worktrees.js";
import { createHook, deliver } from "../hooks/support.js";
import { fetchAs } from "../support/app.js";
import { type Cleanups, undo } from "../support/cleanups.js";
import {
  clusterDatabase,
  completions,
  heldCli,
  heldRun,
  instance,
  post,
} from "../support/instances.js";
import { SseReader } from "../support/sse.js";
import { makeRepo } from "../worktrees/repo.js";

// Where a run executes when several instances share one Postgres (src/runs/puller.ts, src/runs/queue.ts): a run
// the receiving instance cannot start is queued in the database, unowned, and claimed by one that
// can, the key running the fewest runs first; a worktree session's runs run on the host that holds
// its worktree; a stopping instance hands its queued runs over. Real server processes, the held fake CLI.

const cleanups: Cleanups = [];
afterEach(async () => {
  // After each test, not the file: each test's servers hold Postgres connections.
  await undo(cleanups);
});

async function database(url: string): Promise<DatabaseHandle> {
  const handle = await openDatabase({ kind: "postgres", url });
  cleanups.push(() => handle.close());
  return handle;
}

const newSession = async (url: string) =>
  (await (await post(url, "/v1/sessions", {})).json()) as { id: string };

/** A message posted as a client streaming its answer: the response's event stream. */
async function stream(url: string, sessionId: string): Promise<SseReader> {
  const res = await fetch(`${url}/v1/sessions/${sessionId}/messages?events=full`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ text: "more work" }),
  });
  expect(res.status).toBe(200);
  return SseReader.of(res);
}

/**
 * A webhook made on `url` whose deliveries for one PR go to one session; delivers one to an
 * instance, answered 202.
 */
async function perPrHook(url: string) {
  const secret = "bearer-secret-0123456789";
  const headers = { "Content-Type": "application/json", Authorization: `Bearer ${secret}` };
  await createHook(url, {
    name: "per-pr",
    verification: "bearer",
    secret,
    prompt_template: "Review PR {{payload.pr}}",
    session_key_template: "{{payload.pr}}",
  });
  return async (at: string) => {
    const res = await deliver(at, "per-pr", JSON.stringify({ pr: 7 }), headers);
    expect(res.status).toBe(202);
    return (await res.json()) as { run_id: string; session_id: string };
  };
}

/**
 * A (one slot, busy with a held run) and B on a new database. The held run starts before B is up,
 * so that it is certainly A's: a message A admits while its pull holds a place (at start and at
 * each lease tick) goes to the database's queue, where B could claim it.
 */
async function busyA(env: Record<string, string> = {}) {
  const url = await clusterDatabase(cleanups);
  const held = await heldCli(cleanups);
  const all = { DATABASE_URL: url, ...held.fake.bridgeEnv, ...env };
  const a = await instance(cleanups, { ...all, AGENT_BRIDGE_MAX_CONCURRENT_RUNS: "1" });
  const first = await heldRun(a.url, held.fake);
  const b = await instance(cleanups, all);
  const { db } = await database(url);
  const ownerA = (await getRun(db, first.run.id))?.instanceId;
  return { url, db, a, b, held, first, ownerA };
}

/**
 * A on host-a and B on host-b (two hosts played on one machine), in worktree mode, and a session
 * whose worktree is recorded on host-a, as A records the one its CLI made (the fake CLI makes none).
 * `holdA`: A's one slot busy with a held run, started before B is up (see busyA).
 */
async function worktreeOnA(env: Record<string, string> = {}, holdA = false) {
  const repo = await makeRepo("complete");
  cleanups.push(() => rm(repo.root, { recursive: true, force: true }));
  const url = await clusterDatabase(cleanups);
  const held = await heldCli(cleanups);
  const all = {
    DATABASE_URL: url,
    ...held.fake.bridgeEnv,
    AGENT_BRIDGE_WORKTREE_ENABLED: "true",
    AGENT_BRIDGE_WORK_DIR: repo.clone,
    ...env,
  };
  const a = await instance(cleanups, { ...all, AGENT_BRIDGE_HOST_ID: "host-a" });
  if (holdA) await heldRun(a.url, held.fake);
  const b = await instance(cleanups, { ...all, AGENT_BRIDGE_HOST_ID: "host-b" });
  const { db } = await database(url);
  const session = await newSession(b.url);
  await saveSessionWorktree(db, session.id, {
    path: join(repo.clone, ".claude", "worktrees", session.id),
    branch: `worktree-${session.id}`,
    baseRef: null,
    state: "active",
    host: "host-a",
  });
  return { db, a, b, held, session };
}

describe.skipIf(!process.env.TEST_DATABASE_URL)("runs placed across instances", () => {
  it("a message A has no slot for is claimed and run by B; the poster's stream on A gets it all", async () => {
    const { db, a, held, ownerA } = await busyA();
    const session = await newSession(a.url);
    const onA = await stream(a.url, session.id);
    const [started] = await onA.until("run_started");
    const runId = (started?.data as { run_id?: string } | undefined)?.run_id ?? "";
    // Live from B: the CLI's text while it still holds.
    expect((await onA.until("text_delta")).at(-1)?.data).toMatchObject({ text: "working" });
    const owner = (await getRun(db, runId))?.instanceId;
    expect(owner).toBeTruthy();
    expect(owner).not.toBe(ownerA);
    await held.release();
    const rest = await onA.events();
    const ends = rest.filter((f) => f.event === "completion");
    expect(ends.map((f) => f.data)).toEqual([expect.objectContaining({ status: "succeeded" })]);
    expect((await getRun(db, runId))?.status).toBe("succeeded");
  });

  it("30 simultaneous posts to one session over two instances: exactly one runs, the others 409", async () => {
    const { db, a, b } = await busyA();
    const session = await newSession(b.url);
    const answers = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        post(i % 2 ? a.url : b.url, `/v1/sessions/${session.id}/messages`, { text: `n${i}` }),
      ),
    );
    const statuses = answers.map((res) => res.status);
    expect(statuses.filter((s) => s === 202)).toHaveLength(1);
    expect(statuses.filter((s) => s === 409)).toHaveLength(29);
    const bodies = await Promise.all(answers.map((res) => res.json()));
    const busy = bodies.filter((body) => body.code === "session_busy");
    expect(busy).toHaveLength(29);
    const winner = bodies[statuses.indexOf(202)] as { id: string };
    expect(new Set(busy.map((body) => body.active_run_id))).toEqual(new Set([winner.id]));
    expect(await getRun(db, winner.id)).toMatchObject({
      status: expect.stringMatching(/queued|running/),
    });
  });

  it("a run posted to A and queued in the database: after SIGTERM A claims nothing more, and B runs it", async () => {
    const { db, a, b, held, ownerA } = await busyA({ AGENT_BRIDGE_MAX_CONCURRENT_RUNS: "1" });
    // B busy too (its one slot): the run posted to A waits in the database for a slot.
    const onB = await stream(b.url, (await newSession(b.url)).id);
    await onB.until("text_delta");
    const session = await newSession(a.url);
    const res = await post(a.url, `/v1/sessions/${session.id}/messages`, { text: "queued" });
    expect(res.status).toBe(202);
    const run = (await res.json()) as { id: string };
    expect(await getRun(db, run.id)).toMatchObject({ status: "queued", instanceId: null });
    const exited = a.stop("SIGTERM");
    await a.waitForOutput(/shutting down/);
    // A's own run ends within its grace period; B's slot frees, and B takes the queued run.
    await held.release();
    expect(await exited).toBe(0);
    const ends = await completions(b.url, run.id);
    expect(ends.map((f) => f.data)).toEqual([expect.objectContaining({ status: "succeeded" })]);
    const owner = (await getRun(db, run.id))?.instanceId;
    expect(owner).toBeTruthy();
    expect(owner).not.toBe(ownerA);
  });

  it("a freed slot goes to key B's run queued in the database, not to key A's older backlog, while A runs one on the other instance", async () => {
    const url = await clusterDatabase(cleanups);
    const held = await heldCli(cleanups);
    const env = {
      DATABASE_URL: url,
      ...held.fake.bridgeEnv,
      AGENT_BRIDGE_AUTH: "keys",
      AGENT_BRIDGE_MAX_CONCURRENT_RUNS: "1",
    };
    const [x, y] = [await instance(cleanups, env), await instance(cleanups, env)];
    const { db } = await database(url);
    const newKey = async (name: string) => (await issueKey(db, { name, admin: false })).key;
    const [keyA, keyB] = [await newKey("a"), await newKey("b")];
    /** A message of `key` to `at`, in a new session of its own: its run's id. */
    const message = async (at: string, key: string) => {
      const session = await (
        await fetchAs(at, key, "/v1/sessions", { method: "POST", body: "{}" })
      ).json();
      const res = await fetchAs(at, key, `/v1/sessions/${session.id}/messages`, {
        method: "POST",
        headers: { Prefer: "respond-async" },
        body: JSON.stringify({ text: "work" }),
      });
      expect(res.status).toBe(202);
      return ((await res.json()) as { id: string }).id;
    };
    /** Resolves with the run's id once it has started (its `run_started` event, read on X). */
    const started = async (key: string, runId: string) => {
      const events = SseReader.of(await fetchAs(x.url, key, `/v1/runs/${runId}/events`));
      cleanups.push(() => events.cancel());
      await events.until("run_started");
      return runId;
    };
    // Key A runs one on each instance (one slot each) and queues two more; then key B's message.
    const firstA = await message(x.url, keyA);
    await message(y.url, keyA);
    const backlog = [await message(x.url, keyA), await message(y.url, keyA)];
    const ofB = await message(x.url, keyB);
    for (const id of [...backlog, ofB]) {
      expect(await getRun(db, id)).toMatchObject({ status: "queued", instanceId: null });
    }
    const next = Promise.race([...backlog.map((id) => started(keyA, id)), started(keyB, ofB)]);

    // X's slot frees: key B runs none, key A one (on Y), so B's run is claimed first, by X.
    const cancel = await fetchAs(x.url, keyA, `/v1/runs/${firstA}/cancel`, { method: "POST" });
    expect(cancel.status).toBe(200);
    expect(await next).toBe(ofB);
    expect((await getRun(db, ofB))?.instanceId).toBe((await getRun(db, firstA))?.instanceId);
    for (const id of backlog) {
      expect(await getRun(db, id)).toMatchObject({ status: "queued", instanceId: null });
    }
  });

  it("a worktree session's message posted to B runs on A, its worktree's host; 409 once that host has no live instance", async () => {
    const { db, a, b, held, session } = await worktreeOnA();
    await held.release();
    const res = await post(b.url, `/v1/sessions/${session.id}/messages`, { text: "on A?" });
    expect(res.status).toBe(202);
    const run = (await res.json()) as { id: string };
    const ends = await completions(b.url, run.id);
    expect(ends.map((f) => f.data)).toEqual([expect.objectContaining({ status: "succeeded" })]);
    const owner = (await getRun(db, run.id))?.instanceId ?? "";
    const [row] = await db.select().from(instances).where(eq(instances.id, owner));
    expect(row?.host).toBe("host-a");

    expect(await a.stop("SIGTERM")).toBe(0);
    const refused = await post(b.url, `/v1/sessions/${session.id}/messages`, { text: "now?" });
    expect(refused.status).toBe(409);
    expect(await refused.json()).toMatchObject({ code: "worktree_host_gone" });
    expect(await getRun(db, run.id)).toMatchObject({ status: "succeeded" });
  });

  it("a worktree session's run queued for its host ends interrupted when that host's last instance stops", async () => {
    // B looks for runs stranded on a host at each renewal, every second. A's stop marks its end;
    // a lease as short as that would lapse while A is slow to renew on a loaded machine, and B
    // would close the run as stranded before A stopped.
    // A's one slot busy (a session without a worktree yet), so B's message waits for host-a.
    const { db, a, b, held } = await worktreeOnA(
      {
        AGENT_BRIDGE_MAX_CONCURRENT_RUNS: "1",
        AGENT_BRIDGE_LEASE_SECONDS: "20",
        AGENT_BRIDGE_LEASE_RENEW_SECONDS: "1",
      },
      true,
    );
    const pinned = (await db.select().from(worktrees))[0]?.sessionId ?? "";
    const res = await post(b.url, `/v1/sessions/${pinned}/messages`, { text: "for A" });
    expect(res.status).toBe(202);
    const run = (await res.json()) as { id: string };
    expect(await getRun(db, run.id)).toMatchObject({ instanceId: null, pinnedHost: "host-a" });
    const exited = a.stop("SIGTERM");
    await a.waitForOutput(/shutting down/);
    await held.release();
    expect(await exited).toBe(0);
    const ends = await completions(b.url, run.id);
    expect(ends.map((f) => f.data)).toEqual([expect.objectContaining({ status: "interrupted" })]);
  });

  it("a webhook delivery that waited on A for its session, its turn come while A has no free slot, joins the database's queue, and B runs it", async () => {
    const url = await clusterDatabase(cleanups);
    // A CLI each, held apart: B's run can end while A's holds A's one slot.
    const [heldA, heldB] = [await heldCli(cleanups), await heldCli(cleanups)];
    const base = { DATABASE_URL: url, AGENT_BRIDGE_MAX_CONCURRENT_RUNS: "1" };
    const a = await instance(cleanups, { ...base, ...heldA.fake.bridgeEnv });
    const b = await instance(cleanups, { ...base, ...heldB.fake.bridgeEnv });
    const { db } = await database(url);
    const deliverTo = await perPrHook(a.url);
    const send = async (at: string) => (await deliverTo(at)).run_id;
    // The session's first run on B; A's slot taken by another session; the session's next
    // delivery, on A, waits in A's line.
    await send(b.url);
    await heldB.fake.waitForMark("holding");
    await heldRun(a.url, heldA.fake);
    const queued = await send(a.url);
    const ownerA = (await getRun(db, queued))?.instanceId;
    expect(await getRun(db, queued)).toMatchObject({ status: "waiting", instanceId: ownerA });
    // B's run ends: A's line gives the session to its delivery, which A has no slot for. Queued in
    // A's memory, it would wait there for A's slot, ahead of the database's queue; it goes there.
    await heldB.release();
    const ends = await completions(b.url, queued);
    expect(ends.map((f) => f.data)).toEqual([expect.objectContaining({ status: "succeeded" })]);
    const owner = (await getRun(db, queued))?.instanceId;
    expect(owner).toBeTruthy();
    expect(owner).not.toBe(ownerA);
    expect(a.output()).toMatch(/handed a queued run over/);
    await heldA.release();
  });

  it("a webhook delivery for a worktree session, waiting on B for its session, is run on A, the worktree's host, when its turn comes", async () => {
    const { db, a, b, held, session } = await worktreeOnA();
    const send = await perPrHook(a.url);
    const first = await send(a.url);
    await held.fake.waitForMark("holding");
    // The hook's session has its worktree on host-a, as A records it after the run.
    await db
      .update(worktrees)
      .set({ sessionId: first.session_id })
      .where(eq(worktrees.sessionId, session.id));
    const second = await send(b.url);
    expect(second.session_id).toBe(first.session_id);
    expect(await getRun(db, second.run_id)).toMatchObject({
      status: "waiting",
      pinnedHost: "host-a",
    });
    await held.release();
    const ends = await completions(b.url, second.run_id);
    expect(ends.map((f) => f.data)).toEqual([expect.objectContaining({ status: "succeeded" })]);
    const owner = (await getRun(db, second.run_id))?.instanceId ?? "";
    const [row] = await db.select().from(instances).where(eq(instances.id, owner));
    expect(row?.host).toBe("host-a");
  });
});
