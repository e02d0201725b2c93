import { afterEach, describe, expect, it } from "vitest";
import { type Cleanups, undo } from "../support/cleanups.js";
import { clusterDatabase, heldCli, heldRun, instance } from "../support/instances.js";
import { SseReader } from "../support/sse.js";

// The live feed across two server processes on one Postgres: what happens on B reaches a feed
// follower on A, live, through LISTEN/NOTIFY or polling; and a follower that reconnects to B
// resumes where A left it.

const cleanups: Cleanups = [];
afterEach(async () => {
  await undo(cleanups);
});

const MODES: [string, Record<string, string>][] = [
  ["LISTEN/NOTIFY", {}],
  [
    "polling (AGENT_BRIDGE_FOLLOW=poll)",
    { AGENT_BRIDGE_FOLLOW: "poll", AGENT_BRIDGE_FOLLOW_POLL_MS: "100" },
  ],
];

describe.skipIf(!process.env.TEST_DATABASE_URL)("the live feed across instances", () => {
  it.each(MODES)(
    "a run on B reaches a feed follower on A through %s, live, and a resume on B gets the rest once",
    async (_, env) => {
      const url = await clusterDatabase(cleanups);
      const held = await heldCli(cleanups);
      const all = { DATABASE_URL: url, ...held.fake.bridgeEnv, ...env };
      const a = await instance(cleanups, all);
      const b = await instance(cleanups, all);
      const res = await fetch(`${a.url}/v1/events`);
      expect(res.status).toBe(200);
      const onA = SseReader.of(res);
      await onA.next(); // where the stream starts
      const { session, run } = await heldRun(b.url, held.fake);
      // Live on A while the run still holds on B.
      const early = await onA.events(3);
      expect(early.map((f) => [f.event, (f.data as { session_id: string }).session_id])).toEqual([
        ["session_created", session.id],
        ["run_queued", session.id],
        ["run_started", session.id],
      ]);
      expect(early[2]?.data).toMatchObject({ run_id: run.id });
      await onA.cancel();
      await held.release();
      // Resumed on B after what A showed: the run's end, and nothing A showed again.
      const resumed = SseReader.of(
        await fetch(`${b.url}/v1/events`, { headers: { "Last-Event-ID": early[2]?.id ?? "" } }),
      );
      const finished = await resumed.events(1);
      await resumed.cancel();
      expect(finished.map((f) => [f.event, (f.data as { status?: string }).status])).toEqual([
        ["run_finished", "succeeded"],
      ]);
    },
  );
});
