import { afterAll, describe, expect, it } from "vitest";
import { groupAlive, terminateGroup } from "../../src/process/groups.js";
import { createTestApp } from "../support/app.js";
import { serverDatabases } from "../support/db.js";
import { type FakeCli, fakeCli } from "../support/fake-cli.js";
import { longRun } from "../support/fake-scenarios.js";
import { startServer } from "../support/server.js";
import { SseReader } from "../support/sse.js";

// Ctrl-C at a terminal with a run streaming: the server says in a plain line what it waits for
// and how to stop waiting, and a second Ctrl-C ends the runs at once, `interrupted`, rather than
// after the grace (here ten minutes: the test would time out waiting for it).

const fakes: FakeCli[] = [];
afterAll(async () => {
  for (const fake of fakes.splice(0)) await fake.cleanup();
});
const databases = serverDatabases();
afterAll(() => databases.cleanup());

/** A server in its own process group with a ten-minute grace and one run streaming on it. */
async function serverWithRun(env: Record<string, string> = {}) {
  const fake = await fakeCli(longRun(600));
  fakes.push(fake);
  const server = await startServer(
    {
      ...(await databases.embedded()),
      ...fake.bridgeEnv,
      AGENT_BRIDGE_SHUTDOWN_GRACE_SECONDS: "600",
      ...env,
    },
    { ownGroup: true },
  );
  const post = (path: string, body?: unknown) =>
    fetch(`${server.url}${path}`, {
      method: "POST",
      ...(body === undefined
        ? {}
        : { headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) }),
    });
  const session = await (await post("/v1/sessions")).json();
  const reader = SseReader.of(await post(`/v1/sessions/${session.id}/messages`, { text: "long" }));
  expect((await reader.events(2)).map((f) => f.event)).toEqual(["run_started", "text_delta"]);
  const cli = (await fake.invocations())[0]?.pid ?? 0;
  return { server, post, reader, cli, pgid: server.child.pid ?? 0 };
}

const INTERRUPTED = {
  status: "interrupted",
  error: "the server shut down before the run finished",
};

describe("Ctrl-C at the terminal", () => {
  it("says what the stop waits for, and a second Ctrl-C ends the runs at once, interrupted", async () => {
    const { server, reader, cli, pgid } = await serverWithRun();
    try {
      // What Ctrl-C in a terminal sends: SIGINT to the foreground process group.
      process.kill(-pgid, "SIGINT");
      await server.waitForOutput(
        /Stopping: 1 run is still going and may take up to 600 s to finish \(AGENT_BRIDGE_SHUTDOWN_GRACE_SECONDS\)\. Press Ctrl-C again to stop it now\./,
      );
      process.kill(-pgid, "SIGINT");
      await server.waitForOutput(/Stopping the runs now; they end interrupted\./);
      const rest = await reader.events();
      expect(rest.map((f) => f.event)).toEqual(["completion"]);
      expect(rest[0]?.data).toMatchObject(INTERRUPTED);
      expect(await server.exited).toBe(0);
      expect(await groupAlive(cli)).toBe(false);
    } finally {
      await terminateGroup(pgid, 100);
      if (cli) await terminateGroup(cli, 100);
    }
  }, 60_000);

  it("a second signal that came before the stop reached the runs still ends them at once", async () => {
    const fake = await fakeCli(longRun(600));
    fakes.push(fake);
    const t = await createTestApp("pglite", fake.bridgeEnv);
    try {
      const session = await (await t.app.request("/v1/sessions", { method: "POST" })).json();
      const res = await t.app.request(`/v1/sessions/${session.id}/messages`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ text: "long" }),
      });
      const reader = SseReader.of(res);
      expect((await reader.events(2)).map((f) => f.event)).toEqual(["run_started", "text_delta"]);
      // Told to hurry already (a second Ctrl-C while the queued runs were handed back).
      await t.deps.runs.shutdown(600_000, AbortSignal.abort());
      const rest = await reader.events();
      expect(rest.at(-1)?.data).toMatchObject(INTERRUPTED);
    } finally {
      await t.close();
    }
  }, 60_000);
});
