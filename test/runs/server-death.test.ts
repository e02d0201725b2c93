import { afterAll, describe, expect, it } from "vitest";
import { groupAlive, liveGroupMembers, terminateGroup } from "../../src/process/groups.js";
import { type AgentCase, agentMatrix, agentTargets } from "../support/agents.js";
import { serverDatabases } from "../support/db.js";
import type { FakeCli } from "../support/fake-cli.js";
import { longRun } from "../support/fake-scenarios.js";
import { startModel } from "../support/models.js";
import { runCommand, waitUntil } from "../support/process.js";
import { type ServerProcess, startServer } from "../support/server.js";
import { SseReader } from "../support/sse.js";

// What becomes of the CLIs when the server process goes. Killed outright (an OOM kill), the server
// cannot stop them itself: its spawner notices and stops their groups at once. Signalled with its
// whole process group (Ctrl-C in a terminal, a service manager's stop), the server shuts down as
// documented: running runs get the grace period, then end `interrupted`.

/** The fake CLI's run: far longer than any wait below. */
const RUN_SECONDS = 300;
/** A server start takes seconds, and half a minute on a loaded machine: each test starts one or two. */
const TEST_TIMEOUT_MS = 180_000;

const fakes: FakeCli[] = [];
afterAll(async () => {
  for (const fake of fakes.splice(0)) await fake.cleanup();
});

const databases = serverDatabases();
afterAll(() => databases.cleanup());

async function longRunFake(agent: AgentCase): Promise<FakeCli> {
  const fake = await agent.fake(longRun(RUN_SECONDS));
  fakes.push(fake);
  return fake;
}

/** A new session with a long run going: its id, its SSE stream, and its CLI's pid. */
async function runGoing(server: ServerProcess, fake: FakeCli) {
  const session = await (await fetch(`${server.url}/v1/sessions`, { method: "POST" })).json();
  const res = await fetch(`${server.url}/v1/sessions/${session.id}/messages`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ text: "long job" }),
  });
  const reader = SseReader.of(res);
  // The CLI has spoken: it runs.
  expect((await reader.events(2)).map((f) => f.event)).toEqual(["run_started", "text_delta"]);
  const [pid] = (await fake.invocations()).map((i) => i.pid);
  if (!pid) throw new Error("the fake CLI recorded no pid");
  return { runId: res.headers.get("x-run-id"), reader, pid };
}

/** The children of `pid` (those whose command line mentions `pattern`, if given). */
async function childrenOf(pid: number, pattern?: string): Promise<number[]> {
  const args = ["-P", String(pid), ...(pattern ? ["-f", pattern] : [])];
  const { stdout } = await runCommand("pgrep", args, { env: process.env });
  return stdout.split("\n").filter(Boolean).map(Number);
}

/** The server's process group (it and its spawner) has no live process left. */
async function groupEmpty(pgid: number): Promise<boolean> {
  return (await liveGroupMembers(pgid))?.length === 0;
}

describe.each(agentTargets(databases.targets))("when the server goes, $agent on $db", (agent) => {
  const { database } = agent;
  it(
    "killed with SIGKILL alone, its CLIs are stopped at once, long before their runs would end",
    async () => {
      const fake = await longRunFake(agent);
      const server = await startServer(
        { ...(await database()), ...fake.bridgeEnv },
        { ownGroup: true },
      );
      const pgid = server.child.pid ?? 0;
      let cli = 0;
      try {
        const { reader, pid } = await runGoing(server, fake);
        cli = pid;
        await reader.cancel();
        // The server's pid only, as an OOM kill does: its spawner is left to notice.
        await server.stop("SIGKILL");
        await waitUntil(async () => !(await groupAlive(cli)), "the CLI's group is gone");
        await waitUntil(() => groupEmpty(pgid), "the spawner has exited");
      } finally {
        await terminateGroup(pgid, 100);
        if (cli) await terminateGroup(cli, 100);
      }
    },
    TEST_TIMEOUT_MS,
  );

  it.each(["SIGINT", "SIGTERM"] as const)(
    "%s to its whole process group: running runs get the grace, end interrupted (error_code interrupted, and so in the server's log) with one completion, and no process is left",
    async (signal) => {
      const fake = await longRunFake(agent);
      const env = {
        ...(await database()),
        ...fake.bridgeEnv,
        AGENT_BRIDGE_SHUTDOWN_GRACE_SECONDS: "2",
      };
      const server = await startServer(env, { ownGroup: true });
      const pgid = server.child.pid ?? 0;
      let cli = 0;
      try {
        const { runId, reader, pid } = await runGoing(server, fake);
        cli = pid;
        // What Ctrl-C in a terminal sends, and systemd's KillMode=control-group stop.
        process.kill(-pgid, signal);
        const rest = await reader.events();
        expect(rest.map((f) => f.event)).toEqual(["completion"]);
        expect(rest[0]?.data).toMatchObject({
          status: "interrupted",
          error_code: "interrupted",
          error: "the server shut down before the run finished",
        });
        expect(await server.exited).toBe(0);
        // The operator's log says the same as the run: interrupted, not cancelled.
        const finished = server
          .output()
          .split("\n")
          .filter((line) => line.includes(`"msg":"${agent.agent} run finished"`));
        expect(finished).toEqual([expect.stringContaining('"status":"interrupted"')]);
        expect(finished[0]).toContain('"error_code":"interrupted"');
        expect(await groupAlive(cli)).toBe(false);
        await waitUntil(() => groupEmpty(pgid), "the server's process group is empty");

        // The same database, read back by the next start: the run as the stream said, once.
        const next = await startServer(env);
        try {
          const run = await (await fetch(`${next.url}/v1/runs/${runId}`)).json();
          expect(run, JSON.stringify(run)).toMatchObject({
            status: "interrupted",
            completion: { status: "interrupted" },
          });
          const log = await SseReader.of(
            await fetch(`${next.url}/v1/runs/${runId}/events`),
          ).events();
          expect(log.map((f) => f.event)).toEqual(["run_started", "text_delta", "completion"]);
        } finally {
          await next.stop();
        }
      } finally {
        await terminateGroup(pgid, 100);
        if (cli) await terminateGroup(cli, 100);
      }
    },
    TEST_TIMEOUT_MS,
  );
});

// The real CLIs: claude's is one Node process, codex's a Node launcher over a native binary, both
// in the group the spawner stops.
describe.each(agentMatrix.filter((a) => a.db === "pglite"))(
  "when the server goes, with the real $agent CLI",
  (agent) => {
    it(
      "killed with SIGKILL alone, a CLI streaming from the model is stopped at once",
      async () => {
        const model = await startModel(agent.agent);
        // About three minutes of streaming: a message every few seconds, an API event every 500 ms.
        model.answer(
          Array.from({ length: 60 }, (_, i) => `Part ${i}. `),
          { delayMs: 500 },
        );
        const server = await startServer(
          {
            ...(await databases.embedded()),
            ...model.env,
            AGENT_BRIDGE_PERMISSION_MODE: "bypassPermissions",
          },
          { ownGroup: true },
        );
        const pgid = server.child.pid ?? 0;
        let clis: number[] = [];
        try {
          const session = await (
            await fetch(`${server.url}/v1/sessions`, { method: "POST" })
          ).json();
          const res = await fetch(`${server.url}/v1/sessions/${session.id}/messages`, {
            method: "POST",
            headers: { "Content-Type": "application/json" },
            body: JSON.stringify({ text: "Tell me a long story" }),
          });
          const reader = SseReader.of(res);
          // The model is streaming to the CLI, and the CLI to the server.
          expect((await reader.events(2)).map((f) => f.event)).toEqual([
            "run_started",
            "text_delta",
          ]);
          await reader.cancel();
          const [spawner] = await childrenOf(pgid, "spawner-child");
          clis = await childrenOf(spawner ?? 0);
          expect(clis).toHaveLength(1);

          await server.stop("SIGKILL");
          for (const cli of clis) {
            await waitUntil(async () => !(await groupAlive(cli)), "the CLI's group is gone");
          }
          await waitUntil(() => groupEmpty(pgid), "the spawner has exited");
        } finally {
          for (const pid of [pgid, ...clis]) await terminateGroup(pid, 100);
          await model.close();
        }
      },
      TEST_TIMEOUT_MS,
    );
  },
);
