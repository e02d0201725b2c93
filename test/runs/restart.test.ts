import { afterAll, describe, expect, it } from "vitest";
import { groupAlive } from "../../src/process/groups.js";
import { type AgentCase, agentTargets } from "../support/agents.js";
import { type Cleanups, undo } from "../support/cleanups.js";
import { serverDatabases } from "../support/db.js";
import { longRun } from "../support/fake-scenarios.js";
import { startServer } from "../support/server.js";
import { SseReader } from "../support/sse.js";

// A run belongs to the server process: when that process dies, the next one closes the run as
// interrupted (with its completion in the log), kills what it left running, and frees the session.

const cleanups: Cleanups = [];
afterAll(async () => {
  await undo(cleanups);
});

const databases = serverDatabases();
afterAll(() => databases.cleanup());

/** The fake's long run on a fresh database; no grace at shutdown, so stops never wait on it. */
async function longRunServer(agent: AgentCase, database: () => Promise<Record<string, string>>) {
  const fake = await agent.fake(longRun(60));
  cleanups.push(fake.cleanup);
  return {
    fake,
    env: { ...(await database()), ...fake.bridgeEnv, AGENT_BRIDGE_SHUTDOWN_GRACE_SECONDS: "0" },
  };
}

/** A new session with a long run going, and the SSE response following it. */
async function startLongRun(url: string) {
  const session = await (await fetch(`${url}/v1/sessions`, { method: "POST" })).json();
  const res = await fetch(`${url}/v1/sessions/${session.id}/messages`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ text: "long job" }),
  });
  return { session, res };
}

describe.each(agentTargets(databases.targets))("restarts, $agent on $db", (agent) => {
  const { database } = agent;
  it("a server killed with SIGKILL mid-run comes back with the run interrupted (error_code interrupted) and the session free to resume", async () => {
    const { fake, env } = await longRunServer(agent, database);
    const first = await startServer(env);
    const { session, res } = await startLongRun(first.url);
    const runId = res.headers.get("x-run-id");
    const seen = await SseReader.of(res).events(2);
    expect(seen.map((f) => f.event)).toEqual(["run_started", "text_delta"]);
    const [pid] = (await fake.invocations()).map((i) => i.pid);
    expect(pid && (await groupAlive(pid))).toBe(true);

    await first.stop("SIGKILL");
    const second = await startServer(env);
    try {
      expect(pid && (await groupAlive(pid))).toBe(false);
      const run = await (await fetch(`${second.url}/v1/runs/${runId}`)).json();
      expect(run).toMatchObject({
        status: "interrupted",
        completion: { status: "interrupted", error_code: "interrupted" },
      });
      const replay = await SseReader.of(
        await fetch(`${second.url}/v1/runs/${runId}/events`, { headers: { "Last-Event-ID": "2" } }),
      ).events();
      expect(replay.map((f) => [f.id, f.event])).toEqual([["3", "completion"]]);

      const next = await fetch(`${second.url}/v1/sessions/${session.id}/messages`, {
        method: "POST",
        headers: { "Content-Type": "application/json", Prefer: "respond-async" },
        body: JSON.stringify({ text: "again" }),
      });
      expect(next.status).toBe(202);
      // It continues the agent's session, which the killed run had started.
      const { id } = (await next.json()) as { id: string };
      await SseReader.of(await fetch(`${second.url}/v1/runs/${id}/events`)).events(2);
      const starts = await fake.invocations();
      expect(starts).toHaveLength(2);
      expect(starts.map((s) => agent.resumed(s.args))).toEqual([false, true]);
    } finally {
      await second.stop();
    }
  });

  it("SIGTERM gives running runs their completion before the process exits", async () => {
    const { fake, env } = await longRunServer(agent, database);
    const server = await startServer(env);
    const { res } = await startLongRun(server.url);
    const reader = SseReader.of(res);
    await reader.events(2);
    const [pid] = (await fake.invocations()).map((i) => i.pid);

    const exited = server.stop("SIGTERM");
    const [completion] = await reader.events();
    expect(completion).toMatchObject({ event: "completion", data: { status: "interrupted" } });
    expect(await exited).toBe(0);
    expect(pid && (await groupAlive(pid))).toBe(false);
  });
});
