import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ANONYMOUS_ADMIN } from "../../src/principal.js";
import { SessionGoneError } from "../../src/runs/errors.js";
import { deleteSession, getSession } from "../../src/store/sessions.js";
import { agentMatrix } from "../support/agents.js";
import { createTestApp, httpApi, listen, type TestApp } from "../support/app.js";
import type { FakeCli } from "../support/fake-cli.js";
import { streamedReply } from "../support/fake-scenarios.js";
import { SseReader } from "../support/sse.js";

// Posting messages through real HTTP on loopback, with the scripted fake CLI: the three ways to
// be answered, replay and reconnect, and usage bookkeeping, for each agent back-end.

const PARTS = ["Hel", "lo", ", wor", "ld", "!"];

describe.each(agentMatrix)("messages and runs, $agent on $db", (agent) => {
  const deltas = agent.deltas(PARTS);
  let fake: FakeCli;
  let t: TestApp;
  let server: { url: string; close(): Promise<void> };
  let api: ReturnType<typeof httpApi>;

  beforeAll(async () => {
    fake = await agent.fake(
      streamedReply(PARTS, { delayMs: 30, usage: { input: 100, output: 20 }, costUsd: 0.01 }),
    );
    t = await createTestApp(agent.db, fake.bridgeEnv);
    server = await listen(t.app);
    api = httpApi(server.url);
  });
  afterAll(async () => {
    await server.close();
    await t.close();
    await fake.cleanup();
  });

  it("streams the run as SSE by default: run_started first, text deltas, one completion, then closes", async () => {
    const session = await api.newSession();
    const res = await api.postMessage(session.id, "hi");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    const runId = res.headers.get("x-run-id");
    const reader = SseReader.of(res);
    const frames = await reader.events();
    expect(frames.map((f) => f.event)).toEqual([
      "run_started",
      ...deltas.map(() => "text_delta"),
      "completion",
    ]);
    expect(frames.map((f) => f.id)).toEqual(frames.map((_, i) => String(i + 1)));
    expect(frames[0]?.raw).toBe(
      `id: 1\nevent: run_started\ndata: ${JSON.stringify({
        type: "run_started",
        run_id: runId,
        session_id: session.id,
        trigger: "message",
        queued_ms: (frames[0]?.data as { queued_ms?: number } | undefined)?.queued_ms,
      })}\n\n`,
    );
    expect(
      frames
        .slice(1, -1)
        .map((f) => (f.data as { text: string }).text)
        .join(""),
    ).toBe(deltas.join(""));
    expect(frames.at(-1)?.data).toMatchObject({
      type: "completion",
      status: "succeeded",
      result: "Hello, world!",
      usage: { input_tokens: 100, output_tokens: 20 },
      session_usage: { input_tokens: 100, output_tokens: 20, runs: 1 },
    });
    expect(await reader.ended()).toBe(true);
  });

  it("with Accept: application/json waits and returns the run, its completion and its full text", async () => {
    const session = await api.newSession();
    const res = await api.postMessage(session.id, "hi", { Accept: "application/json" });
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body.text).toBe("Hello, world!");
    expect(body.completion).toMatchObject({ type: "completion", status: "succeeded" });
    expect(body.run).toMatchObject({
      session_id: session.id,
      status: "succeeded",
      result: "Hello, world!",
    });
    expect(body.run.completion).toEqual(body.completion);
  });

  it("with Prefer: respond-async answers 202 at once; the run can be followed and read later", async () => {
    const session = await api.newSession();
    const res = await api.postMessage(session.id, "hi", { Prefer: "respond-async" });
    expect(res.status).toBe(202);
    const run = await res.json();
    expect(res.headers.get("location")).toBe(`/v1/runs/${run.id}`);
    expect(run.status).toMatch(/queued|running/);

    const frames = await SseReader.of(
      await fetch(`${server.url}/v1/runs/${run.id}/events`),
    ).events();
    expect(frames.at(-1)?.event).toBe("completion");

    const finished = await (await fetch(`${server.url}/v1/runs/${run.id}`)).json();
    expect(finished).toMatchObject({
      status: "succeeded",
      result: "Hello, world!",
      completion: { status: "succeeded" },
    });
    expect(finished.started_at).not.toBeNull();
    expect(finished.finished_at).not.toBeNull();
  });

  it("a client that drops the stream and reconnects with Last-Event-ID gets exactly the rest", async () => {
    const session = await api.newSession();
    const res = await api.postMessage(session.id, "hi");
    const runId = res.headers.get("x-run-id");
    const first = SseReader.of(res);
    // run_started and all the deltas but the last.
    const seen = deltas.length;
    const head = await first.events(seen);
    await first.cancel();

    const rest = await SseReader.of(
      await fetch(`${server.url}/v1/runs/${runId}/events`, {
        headers: { "Last-Event-ID": String(seen) },
      }),
    ).events();
    const all = await SseReader.of(await fetch(`${server.url}/v1/runs/${runId}/events`)).events();
    expect([...head, ...rest].map((f) => f.raw)).toEqual(all.map((f) => f.raw));
    expect(rest[0]?.id).toBe(String(seen + 1));
  });

  it("replays a finished run from ?after=N and closes", async () => {
    const session = await api.newSession();
    const { run } = await (
      await api.postMessage(session.id, "hi", { Accept: "application/json" })
    ).json();
    // run_started, the deltas, the completion: the last two.
    const after = deltas.length;
    const reader = SseReader.of(
      await fetch(`${server.url}/v1/runs/${run.id}/events?after=${after}`),
    );
    const frames = await reader.events();
    expect(frames.map((f) => f.id)).toEqual([String(after + 1), String(after + 2)]);
    expect(frames.at(-1)?.event).toBe("completion");
  });

  it("?events=full adds the internal events; each view numbers its own events without gaps", async () => {
    const session = await api.newSession();
    const { run } = await (
      await api.postMessage(session.id, "hi", { Accept: "application/json" })
    ).json();
    const shown = await SseReader.of(
      await fetch(`${server.url}/v1/runs/${run.id}/events`),
    ).events();
    const full = await SseReader.of(
      await fetch(`${server.url}/v1/runs/${run.id}/events?events=full`),
    ).events();
    expect(shown.map((f) => f.id)).toEqual(shown.map((_, i) => String(i + 1)));
    expect(full.map((f) => f.id)).toEqual(full.map((_, i) => String(i + 1)));
    expect(shown.map((f) => f.event)).not.toContain("session_status");
    expect(full.map((f) => f.event)).toContain("session_status");
    expect(
      full.filter((f) =>
        shown.some((g) => g.raw.slice(g.raw.indexOf("\n")) === f.raw.slice(f.raw.indexOf("\n"))),
      ),
    ).toHaveLength(shown.length);
    const tail = await SseReader.of(
      await fetch(`${server.url}/v1/runs/${run.id}/events?events=full`, {
        headers: { "Last-Event-ID": String(full.length - 1) },
      }),
    ).events();
    expect(tail.map((f) => f.event)).toEqual(["completion"]);
  });

  it("?events=full on the message itself streams the full view, as GET …/events?events=full replays it", async () => {
    const session = await api.newSession();
    const res = await fetch(`${server.url}/v1/sessions/${session.id}/messages?events=full`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ text: "hi" }),
    });
    const live = await SseReader.of(res).events();
    expect(live.map((f) => f.event)).toContain("session_status");
    const replay = await SseReader.of(
      await fetch(`${server.url}/v1/runs/${res.headers.get("x-run-id")}/events?events=full`),
    ).events();
    expect(live.map((f) => f.raw)).toEqual(replay.map((f) => f.raw));
  });

  it("resumes the CLI session on the second message", async () => {
    const session = await api.newSession();
    const before = (await fake.invocations()).length;
    await (await api.postMessage(session.id, "one", { Accept: "application/json" })).json();
    await (await api.postMessage(session.id, "two", { Accept: "application/json" })).json();
    const invocations = (await fake.invocations()).slice(before);
    expect(invocations.map((r) => (agent.resumed(r.args) ? "resume" : "new"))).toEqual([
      "new",
      "resume",
    ]);
  });

  it("a message to a session deleted after the route read it is refused as not found, and runs nothing", async () => {
    const created = await api.newSession();
    const session = await getSession(t.database.db, created.id, ANONYMOUS_ADMIN);
    if (!session) throw new Error("the new session is not there");
    await deleteSession(t.database.db, session.id);
    const message = { text: "late", systemPrompt: null, trigger: "message", idempotencyKey: null };
    await expect(t.deps.runs.submit(session, message)).rejects.toThrow(SessionGoneError);
    expect(t.deps.runs.isActive(session.id)).toBe(false);
  });

  it("an Idempotency-Key retried returns the same run; with another body it is a 422", async () => {
    const session = await api.newSession();
    const key = { "Idempotency-Key": `k-${session.id}`, Prefer: "respond-async" };
    const first = await (await api.postMessage(session.id, "same", key)).json();
    const again = await api.postMessage(session.id, "same", key);
    expect(again.status).toBe(202);
    expect((await again.json()).id).toBe(first.id);
    const other = await api.postMessage(session.id, "different", key);
    expect(other.status).toBe(422);
    expect((await other.json()).code).toBe("idempotency_key_reused");
    await SseReader.of(await fetch(`${server.url}/v1/runs/${first.id}/events`)).events();
  });

  it("adds every run's usage to its session and to the totals, equal to the completions' sum", async () => {
    const before = await (await fetch(`${server.url}/v1/usage`)).json();
    const a = await api.newSession();
    const b = await api.newSession();
    const completions: {
      usage: Record<"input_tokens" | "output_tokens", number>;
      cost_usd: number | null;
    }[] = [];
    for (const s of [a, b, a]) {
      completions.push(
        (await (await api.postMessage(s.id, "count me", { Accept: "application/json" })).json())
          .completion,
      );
    }
    const sum = (key: "input_tokens" | "output_tokens") =>
      completions.reduce((n, c) => n + c.usage[key], 0);
    const after = await (await fetch(`${server.url}/v1/usage`)).json();
    expect(after.input_tokens - before.input_tokens).toBe(sum("input_tokens"));
    expect(after.output_tokens - before.output_tokens).toBe(sum("output_tokens"));
    expect(after.runs - before.runs).toBe(3);
    expect(after.cost_usd - before.cost_usd).toBeCloseTo(
      completions.reduce((n, c) => n + (c.cost_usd ?? 0), 0),
      10,
    );
    const sessionA = await (await fetch(`${server.url}/v1/sessions/${a.id}`)).json();
    expect(sessionA.usage).toMatchObject({ input_tokens: 200, output_tokens: 40, runs: 2 });
  });
});
