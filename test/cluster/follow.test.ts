import { afterEach, describe, expect, it } from "vitest";
import { postRunCommand } from "../../src/store/commands.js";
import { openDatabase } from "../../src/store/db.js";
import { getRun } from "../../src/store/runs.js";
import { type Cleanups, undo } from "../support/cleanups.js";
import {
  clusterDatabase,
  follow,
  groupGone,
  heldCli,
  heldRun,
  instance,
} from "../support/instances.js";
import { wire } from "../support/sse.js";

// A run executed by instance A, followed, cancelled and its session deleted through instance B,
// both real server processes on one Postgres (src/cluster/).

// Each test's servers go at its end: kept to the file's end, their connections added up to
// more than the test Postgres server takes.
const cleanups: Cleanups = [];
afterEach(async () => {
  await undo(cleanups);
});

/** A and B on a new database, and a run of the held CLI going on A. */
async function runOnA(env: Record<string, string> = {}) {
  const url = await clusterDatabase(cleanups);
  const held = await heldCli(cleanups);
  const all = { DATABASE_URL: url, ...held.fake.bridgeEnv, ...env };
  const a = await instance(cleanups, all);
  const b = await instance(cleanups, all);
  return { url, a, b, held, ...(await heldRun(a.url, held.fake)) };
}

/** How B hears of A's events, and A of B's commands. */
const MODES: [string, Record<string, string>][] = [
  ["LISTEN/NOTIFY", {}],
  [
    "polling (AGENT_BRIDGE_FOLLOW=poll)",
    { AGENT_BRIDGE_FOLLOW: "poll", AGENT_BRIDGE_FOLLOW_POLL_MS: "100" },
  ],
];

describe.skipIf(!process.env.TEST_DATABASE_URL)("a run of instance A, from instance B", () => {
  it.each(MODES)(
    "followed from B through %s: A's events live, the same ids in order, one completion",
    async (_, env) => {
      const { a, b, held, run } = await runOnA(env);
      const onB = await follow(b.url, run.id);
      // Live: B has the CLI's text while the CLI still holds.
      const early = await onB.until("text_delta");
      expect(early.at(-1)?.data).toMatchObject({ text: "working" });
      await held.release();
      const seenOnB = [...early, ...(await onB.events())];
      const seenOnA = await (await follow(a.url, run.id)).events();
      expect(wire(seenOnB)).toEqual(wire(seenOnA));
      expect(seenOnB.map((f) => f.id)).toEqual(seenOnB.map((_, i) => String(i + 1)));
      const ends = seenOnB.filter((f) => f.event === "completion");
      expect(ends.map((f) => f.data)).toEqual([expect.objectContaining({ status: "succeeded" })]);
      expect(seenOnB.at(-1)?.event).toBe("completion");
    },
  );

  it("B's follower gets the interrupted completion once A, killed, is found gone", async () => {
    const { a, b, run } = await runOnA({
      AGENT_BRIDGE_LEASE_SECONDS: "2",
      AGENT_BRIDGE_LEASE_RENEW_SECONDS: "1",
    });
    const onB = await follow(b.url, run.id);
    await onB.until("text_delta");
    await a.stop("SIGKILL");
    const rest = await onB.events();
    expect(rest.filter((f) => f.event === "completion").map((f) => f.data)).toEqual([
      expect.objectContaining({ status: "interrupted" }),
    ]);
    expect(rest.at(-1)?.event).toBe("completion");
  });

  it.each(MODES)(
    "cancelled from B through %s: A stops its CLI, the run ends cancelled, and B answers with it",
    async (_, env) => {
      const { a, b, run, pid } = await runOnA(env);
      const onA = await follow(a.url, run.id);
      const res = await fetch(`${b.url}/v1/runs/${run.id}/cancel`, { method: "POST" });
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ status: "cancelled" });
      await groupGone(pid);
      const ends = (await onA.events()).filter((f) => f.event === "completion");
      expect(ends.map((f) => f.data)).toEqual([expect.objectContaining({ status: "cancelled" })]);
    },
  );

  it("a cancel whose ring A never heard is taken at A's next lease renewal", async () => {
    const { url, a, run, pid } = await runOnA({
      AGENT_BRIDGE_LEASE_SECONDS: "4",
      AGENT_BRIDGE_LEASE_RENEW_SECONDS: "1",
    });
    const onA = await follow(a.url, run.id);
    const database = await openDatabase({ kind: "postgres", url });
    try {
      const row = await getRun(database.db, run.id);
      const owner = row?.instanceId ?? "";
      // Posted without its NOTIFY, as when the owner's LISTEN connection was down.
      expect(
        await postRunCommand(database.db, { runId: run.id, kind: "cancel", owner }, false),
      ).toBe(true);
    } finally {
      await database.close();
    }
    const ends = (await onA.events()).filter((f) => f.event === "completion");
    expect(ends.map((f) => f.data)).toEqual([expect.objectContaining({ status: "cancelled" })]);
    await groupGone(pid);
  });

  it("a cancel from B of a run A has finished answers 409, as on A", async () => {
    const { a, b, held, run } = await runOnA();
    await held.release();
    await (await follow(a.url, run.id)).events();
    const res = await fetch(`${b.url}/v1/runs/${run.id}/cancel`, { method: "POST" });
    expect(res.status).toBe(409);
  });

  it("its session deleted on B: A's run is cancelled first, then the session is gone", async () => {
    const { a, b, run, session, pid } = await runOnA();
    const onA = await follow(a.url, run.id);
    const res = await fetch(`${b.url}/v1/sessions/${session.id}`, { method: "DELETE" });
    expect(res.status).toBe(204);
    await groupGone(pid);
    const ends = (await onA.events()).filter((f) => f.event === "completion");
    expect(ends.map((f) => f.data)).toEqual([expect.objectContaining({ status: "cancelled" })]);
    expect((await fetch(`${a.url}/v1/sessions/${session.id}`)).status).toBe(404);
    expect(a.output()).not.toMatch(/"level":"error"/);
  });
});
