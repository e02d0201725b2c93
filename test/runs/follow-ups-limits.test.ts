import { afterAll, describe, expect, it } from "vitest";
import { createTestApp, listen } from "../support/app.js";
import { type Cleanups, undo } from "../support/cleanups.js";
import { BACKENDS } from "../support/db.js";
import { completions, heldCli } from "../support/instances.js";

// A follow-up waiting its turn takes a place in the server's queue like any run not started:
// beyond the queue it is refused with 429 and Retry-After, and changes nothing.

const cleanups: Cleanups = [];
afterAll(async () => {
  await undo(cleanups);
});

describe.each(BACKENDS)("follow-ups and the queue's bound on %s", (backend) => {
  it("a follow-up beyond the server's queue is a 429 with Retry-After; the one queued still runs", async () => {
    const { fake, release } = await heldCli(cleanups);
    const t = await createTestApp(backend, {
      ...fake.bridgeEnv,
      AGENT_BRIDGE_MAX_CONCURRENT_RUNS: "1",
      AGENT_BRIDGE_MAX_QUEUED_RUNS: "1",
    });
    const server = await listen(t.app);
    cleanups.push(
      () => t.close(),
      () => server.close(),
    );
    const post = (path: string, body: unknown, headers = {}) =>
      fetch(`${server.url}${path}`, {
        method: "POST",
        headers: { "Content-Type": "application/json", Prefer: "respond-async", ...headers },
        body: JSON.stringify(body),
      });
    const session = (await (await post("/v1/sessions", {})).json()) as { id: string };
    const live = await post(`/v1/sessions/${session.id}/messages`, { text: "work" });
    expect(live.status).toBe(202);
    await fake.waitForMark("holding");

    const queued = await post(`/v1/sessions/${session.id}/messages`, {
      text: "next",
      when_busy: "queue",
    });
    expect(queued.status).toBe(202);
    const full = await post(`/v1/sessions/${session.id}/messages`, {
      text: "one too many",
      when_busy: "queue",
    });
    expect(full.status).toBe(429);
    expect(Number(full.headers.get("retry-after"))).toBeGreaterThan(0);
    const runs = (await (await fetch(`${server.url}/v1/sessions/${session.id}/runs`)).json()) as {
      data: unknown[];
    };
    expect(runs.data).toHaveLength(2);

    await release();
    const next = (await queued.json()) as { id: string };
    const ends = await completions(server.url, next.id);
    expect(ends.map((f) => f.data)).toEqual([expect.objectContaining({ status: "succeeded" })]);
  });
});
