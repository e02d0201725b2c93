import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { groupAlive } from "../../src/process/groups.js";
import { runEventBatches } from "../../src/store/schema.js";
import { agentMatrix } from "../support/agents.js";
import { createTestApp, httpApi, listen, type TestApp } from "../support/app.js";
import type { FakeCli } from "../support/fake-cli.js";
import { longRun } from "../support/fake-scenarios.js";
import { SseReader } from "../support/sse.js";

// One run per session, a global limit with a bounded queue, and cancel: against real HTTP and
// the fake CLI, whose long runs stay active until cancelled.

describe.each(agentMatrix)("run concurrency, $agent on $db", (agent) => {
  let fake: FakeCli;
  let t: TestApp;
  let server: { url: string; close(): Promise<void> };
  let api: ReturnType<typeof httpApi>;

  beforeAll(async () => {
    fake = await agent.fake(longRun(30));
    t = await createTestApp(agent.db, {
      ...fake.bridgeEnv,
      AGENT_BRIDGE_MAX_CONCURRENT_RUNS: "2",
      AGENT_BRIDGE_MAX_QUEUED_RUNS: "1",
      AGENT_BRIDGE_SSE_KEEPALIVE_SECONDS: "1",
    });
    server = await listen(t.app);
    api = httpApi(server.url);
  });
  afterAll(async () => {
    await server.close();
    await t.close();
    await fake.cleanup();
  });

  // The prompt names the session: its CLI's start is found by it (FakeCli.startsFor).
  const postAsync = (sessionId: string, text = `work in ${sessionId}`) =>
    api.postMessage(sessionId, text, { Prefer: "respond-async" });
  const cancel = (runId: string) =>
    fetch(`${server.url}/v1/runs/${runId}/cancel`, { method: "POST" });

  it("of 20 simultaneous messages to one session exactly one runs; the others get 409 naming it", async () => {
    const session = await api.newSession();
    const responses = await Promise.all(
      Array.from({ length: 20 }, (_, i) => postAsync(session.id, `m${i} in ${session.id}`)),
    );
    const accepted = responses.filter((r) => r.status === 202);
    const refused = responses.filter((r) => r.status === 409);
    expect(accepted).toHaveLength(1);
    expect(refused).toHaveLength(19);
    const run = await accepted[0]?.json();
    for (const res of refused) {
      expect(await res.json()).toMatchObject({
        code: "session_busy",
        active_run_id: run.id,
        events_url: `/v1/runs/${run.id}/events`,
      });
    }
    // Wait until the run's CLI is up, then make sure it is the only one for this session.
    await SseReader.of(await fetch(`${server.url}/v1/runs/${run.id}/events`)).events(2);
    expect(await fake.startsFor(session.id)).toHaveLength(1);
    expect((await cancel(run.id)).status).toBe(200);
  });

  it("cancel ends a running run as cancelled with no process of its group left; a second cancel is 409", async () => {
    const session = await api.newSession();
    const run = await (await postAsync(session.id)).json();
    const reader = SseReader.of(await fetch(`${server.url}/v1/runs/${run.id}/events`));
    await reader.events(2);
    const [invocation] = await fake.startsFor(session.id);
    expect(invocation && (await groupAlive(invocation.pid))).toBe(true);

    const res = await cancel(run.id);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({
      status: "cancelled",
      completion: { status: "cancelled" },
    });
    expect(invocation && (await groupAlive(invocation.pid))).toBe(false);
    const [completion] = await reader.events();
    expect(completion).toMatchObject({ event: "completion", data: { status: "cancelled" } });
    expect(await reader.ended()).toBe(true);

    const again = await cancel(run.id);
    expect(again.status).toBe(409);
    expect((await again.json()).code).toBe("run_finished");
    // The session is free again.
    const next = await postAsync(session.id);
    expect(next.status).toBe(202);
    await cancel((await next.json()).id);
  });

  it("cancel asks a claude CLI to end its turn before it stops the group; one that does not answer is killed, and codex is stopped at once", async () => {
    const interruptsOf = async (sessionId: string) => {
      const [start] = await fake.startsFor(sessionId);
      return (start?.stdin ?? []).filter((line) => line.includes('"subtype":"interrupt"'));
    };
    const cancelled = async (answersInterrupt: boolean) => {
      await fake.setScenario({ ...longRun(30), ignoreInterrupt: !answersInterrupt });
      const session = await api.newSession();
      const run = await (await postAsync(session.id)).json();
      await SseReader.of(await fetch(`${server.url}/v1/runs/${run.id}/events`)).events(2);
      const res = await cancel(run.id);
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ status: "cancelled" });
      const [start] = await fake.startsFor(session.id);
      expect(start && (await groupAlive(start.pid))).toBe(false);
      return interruptsOf(session.id);
    };
    try {
      expect(await cancelled(true)).toHaveLength(agent.agent === "claude" ? 1 : 0);
      // A CLI that never answers is asked all the same, then stopped.
      expect(await cancelled(false)).toHaveLength(agent.agent === "claude" ? 1 : 0);
    } finally {
      await fake.setScenario(longRun(30));
    }
  });

  it("queues past the run limit, refuses past the queue with 429 and Retry-After, and reports the wait", async () => {
    const [a, b, c, d] = [
      await api.newSession(),
      await api.newSession(),
      await api.newSession(),
      await api.newSession(),
    ];
    const runA = await (await postAsync(a.id)).json();
    const runB = await (await postAsync(b.id)).json();
    const runC = await (await postAsync(c.id)).json();
    expect(runC.status).toBe("queued");

    const refused = await postAsync(d.id);
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
    expect((await refused.json()).code).toBe("queue_full");

    await new Promise((r) => setTimeout(r, 200));
    await cancel(runA.id);
    const [started] = await SseReader.of(
      await fetch(`${server.url}/v1/runs/${runC.id}/events`),
    ).events(1);
    expect(started?.event).toBe("run_started");
    expect((started?.data as { queued_ms?: number } | undefined)?.queued_ms).toBeGreaterThanOrEqual(
      200,
    );
    await cancel(runB.id);
    await cancel(runC.id);
  });

  it("cancelling a queued run ends it without ever starting the CLI", async () => {
    const sessions = [await api.newSession(), await api.newSession(), await api.newSession()];
    const runs = [];
    for (const s of sessions) runs.push(await (await postAsync(s.id)).json());
    const queued = runs[2];
    expect(queued.status).toBe("queued");
    const res = await cancel(queued.id);
    expect(await res.json()).toMatchObject({ status: "cancelled" });
    const frames = await SseReader.of(
      await fetch(`${server.url}/v1/runs/${queued.id}/events`),
    ).events();
    expect(frames.map((f) => f.event)).toEqual(["run_started", "completion"]);
    expect(frames[1]?.data).toMatchObject({
      status: "cancelled",
      error_code: "cancelled",
      error: "cancelled before it started",
    });
    expect(await fake.startsFor(sessions[2]?.id ?? "")).toHaveLength(0);
    for (const run of runs.slice(0, 2)) await cancel(run.id);
  });

  it("keeps an idle stream open with a keep-alive comment", async () => {
    const session = await api.newSession();
    const run = await (await postAsync(session.id)).json();
    const reader = SseReader.of(await fetch(`${server.url}/v1/runs/${run.id}/events`));
    await reader.events(2);
    const frame = await reader.next();
    expect(frame?.raw).toBe(": keep-alive\n\n");
    await cancel(run.id);
    expect((await reader.events()).at(-1)?.event).toBe("completion");
  });

  it("deleting a session stops its active run first, and takes its runs and events with it", async () => {
    const session = await api.newSession();
    const run = await (await postAsync(session.id)).json();
    await SseReader.of(await fetch(`${server.url}/v1/runs/${run.id}/events`)).events(2);
    const res = await fetch(`${server.url}/v1/sessions/${session.id}`, { method: "DELETE" });
    expect(res.status).toBe(204);
    expect((await fetch(`${server.url}/v1/runs/${run.id}`)).status).toBe(404);
    const events = await t.database.db
      .select()
      .from(runEventBatches)
      .where(eq(runEventBatches.runId, run.id));
    expect(events).toEqual([]);
    const [invocation] = await fake.startsFor(session.id);
    expect(invocation && (await groupAlive(invocation.pid))).toBe(false);
  });
});
