import { afterAll, describe, expect, it } from "vitest";
import { groupAlive } from "../../src/process/groups.js";
import { type Cleanups, undo } from "../support/cleanups.js";
import {
  clusterDatabase,
  completions,
  follow,
  heldCli,
  heldRun,
  instance,
} from "../support/instances.js";
import { startPgProxy } from "../support/pg-proxy.js";
import { SseReader, wire } from "../support/sse.js";
import { result, systemInit } from "../support/stream-json-lines.js";

// Several server processes on one Postgres: each is an instance with a lease, and none touches
// another's runs while that one holds it (src/cluster/lease.ts).

const cleanups: Cleanups = [];
afterAll(async () => {
  await undo(cleanups);
});

describe.skipIf(!process.env.TEST_DATABASE_URL)("instances on one Postgres", () => {
  it("a second instance starting on the database leaves the first one's live run alone", async () => {
    const url = await clusterDatabase(cleanups);
    const { fake, release } = await heldCli(cleanups);
    const env = { DATABASE_URL: url, ...fake.bridgeEnv };
    const a = await instance(cleanups, env);
    const { run, pid } = await heldRun(a.url, fake);

    const b = await instance(cleanups, env);
    // B is up: it has swept once, and left A's run and A's CLI as they were.
    expect(await (await fetch(`${b.url}/v1/runs/${run.id}`)).json()).toMatchObject({
      status: "running",
    });
    expect(await groupAlive(pid)).toBe(true);
    expect((await fake.record()).signals).toEqual([]);

    await release();
    const ends = await completions(a.url, run.id);
    expect(ends.map((f) => f.data)).toEqual([expect.objectContaining({ status: "succeeded" })]);
    expect(await (await fetch(`${b.url}/v1/runs/${run.id}`)).json()).toMatchObject({
      status: "succeeded",
      completion: { result: "done" },
    });
  });

  it("an instance that lost its lease (stopped past its expiry) finds its run closed by another, stops its CLI and writes nothing more to it", async () => {
    const url = await clusterDatabase(cleanups);
    const { fake } = await heldCli(cleanups);
    const env = {
      DATABASE_URL: url,
      ...fake.bridgeEnv,
      AGENT_BRIDGE_LEASE_SECONDS: "2",
      AGENT_BRIDGE_LEASE_RENEW_SECONDS: "1",
    };
    const a = await instance(cleanups, env);
    const b = await instance(cleanups, env);
    const { session, run, pid } = await heldRun(a.url, fake);

    // A stops (as a process paused, or cut off from the database, would): its lease runs out.
    a.child.kill("SIGSTOP");
    await b.waitForOutput(/closed the runs of an instance that is gone/, 30_000);
    const closed = await (await fetch(`${b.url}/v1/runs/${run.id}`)).json();
    expect(closed).toMatchObject({ status: "interrupted", completion: { status: "interrupted" } });
    // A's process lives (stopped): B leaves its CLI to it.
    expect(await groupAlive(pid)).toBe(true);

    a.child.kill("SIGCONT");
    await a.waitForOutput(/lease expired and another instance closed its runs/, 30_000);
    // A stops the CLI itself (it was never released).
    const until = Date.now() + 20_000;
    while (await groupAlive(pid)) {
      if (Date.now() > until)
        throw new Error(`A left its CLI running:\n${a.output().slice(-3000)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const ends = await completions(b.url, run.id);
    expect(ends.map((f) => f.data)).toEqual([expect.objectContaining({ status: "interrupted" })]);
    const replay = await SseReader.of(
      await fetch(`${b.url}/v1/runs/${run.id}/events?events=full`),
    ).events();
    expect(replay.at(-1)?.event).toBe("completion");
    expect(replay.filter((f) => f.event === "text_delta").length).toBeLessThanOrEqual(1);

    // A carries on as a new instance: the session takes its next message there.
    await fake.setScenario({
      steps: [{ emit: systemInit() }, { emit: result({ result: "again" }) }],
    });
    const next = await fetch(`${a.url}/v1/sessions/${session.id}/messages`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify({ text: "again" }),
    });
    expect(await next.json()).toMatchObject({ run: { status: "succeeded" } });
  });

  it("a run whose owner lost the database past its lease and its outage bound has one completion, the stored one, for its owner's clients too", async () => {
    const url = await clusterDatabase(cleanups);
    const proxy = await startPgProxy(url);
    cleanups.push(async () => proxy.close());
    const { fake, release } = await heldCli(cleanups);
    const env = {
      ...fake.bridgeEnv,
      AGENT_BRIDGE_LEASE_SECONDS: "2",
      AGENT_BRIDGE_LEASE_RENEW_SECONDS: "1",
      AGENT_BRIDGE_DB_OUTAGE_SECONDS: "2",
    };
    // C reaches the database through the proxy, B directly.
    const c = await instance(cleanups, { ...env, DATABASE_URL: proxy.url });
    const b = await instance(cleanups, { ...env, DATABASE_URL: url });
    const { run } = await heldRun(c.url, fake);
    const onC = await follow(c.url, run.id);
    const onB = await follow(b.url, run.id);
    await onC.until("text_delta");

    // C loses the database; its CLI ends the run meanwhile. Past C's lease B closes the run as
    // stranded; past its bound C knows an outcome (failed) that it cannot store.
    proxy.down();
    await release();
    await b.waitForOutput(/closed the runs of an instance that is gone/, 30_000);
    await c.waitForOutput(/could not record a run's end/, 30_000);
    proxy.up();

    const seenOnC = (await onC.events()).filter((f) => f.event === "completion");
    const seenOnB = (await onB.events()).filter((f) => f.event === "completion");
    const replay = await completions(c.url, run.id);
    expect(replay.map((f) => f.data)).toEqual([expect.objectContaining({ status: "interrupted" })]);
    expect(wire(seenOnC)).toEqual(wire(replay));
    expect(wire(seenOnB)).toEqual(wire(replay));
  });
});
