import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueKey } from "../../src/auth/keys.js";
import { createTestApp, fetchAs, listen, type TestApp } from "../support/app.js";
import { type Cleanups, undo } from "../support/cleanups.js";
import { BACKENDS } from "../support/db.js";
import { heldCli } from "../support/instances.js";
import { SseReader } from "../support/sse.js";

// The run slots are shared fairly between keys: a freed slot goes to the key with the fewest runs
// running, so that one key's backlog does not hold every other key's run behind it (README
// "Security"). On PGlite the instance's queue in memory decides; on Postgres the claim of the
// runs queued in the database (the same rule over every instance: test/cluster/claims.test.ts).

describe.each(BACKENDS)("fair shares of the run slots on %s", (backend) => {
  const cleanups: Cleanups = [];
  let t: TestApp;
  let url: string;

  beforeAll(async () => {
    // A CLI that holds until the test ends: a slot frees only when the test cancels its run.
    const { fake } = await heldCli(cleanups);
    t = await createTestApp(backend, {
      ...fake.bridgeEnv,
      AGENT_BRIDGE_AUTH: "keys",
      AGENT_BRIDGE_MAX_CONCURRENT_RUNS: "2",
    });
    const server = await listen(t.app);
    url = server.url;
    cleanups.push(() => t.close(), server.close);
  });
  afterAll(() => undo(cleanups));

  const newKey = async (name: string) =>
    (await issueKey(t.database.db, { name, admin: false })).key;

  /** A message of `key` in a new session of its own, answered at once: its run. */
  async function message(key: string): Promise<{ id: string; status: string }> {
    const session = await (
      await fetchAs(url, key, "/v1/sessions", { method: "POST", body: "{}" })
    ).json();
    const res = await fetchAs(url, key, `/v1/sessions/${session.id}/messages`, {
      method: "POST",
      headers: { Prefer: "respond-async" },
      body: JSON.stringify({ text: "work" }),
    });
    expect(res.status).toBe(202);
    return res.json();
  }

  /** Resolves with the run's id once it has started (its `run_started` event). */
  async function started(key: string, runId: string): Promise<string> {
    const events = SseReader.of(await fetchAs(url, key, `/v1/runs/${runId}/events`));
    cleanups.push(() => events.cancel());
    await events.until("run_started");
    return runId;
  }

  it("key B's run is the next to start when a slot frees, though key A queued its backlog before it", async () => {
    const [keyA, keyB] = [await newKey("a"), await newKey("b")];
    const status = async (key: string, runId: string) =>
      ((await (await fetchAs(url, key, `/v1/runs/${runId}`)).json()) as { status: string }).status;
    // A takes both slots and queues three more; then B's one message.
    const ofA = [];
    for (let i = 0; i < 5; i++) ofA.push(await message(keyA));
    const ofB = await message(keyB);
    const [first, , ...backlog] = ofA;
    for (const run of backlog) expect(await status(keyA, run.id)).toBe("queued");
    expect(await status(keyB, ofB.id)).toBe("queued");
    const next = Promise.race([
      ...backlog.map((run) => started(keyA, run.id)),
      started(keyB, ofB.id),
    ]);

    // A's first run ends: its slot goes to B, which runs none, before A, which runs one.
    const cancel = await fetchAs(url, keyA, `/v1/runs/${first?.id}/cancel`, { method: "POST" });
    expect(cancel.status).toBe(200);
    expect(await next).toBe(ofB.id);
    for (const run of backlog) expect(await status(keyA, run.id)).toBe("queued");
  });
});
