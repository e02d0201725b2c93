import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { groupAlive } from "../../src/process/groups.js";
import { agentMatrix } from "../support/agents.js";
import { createTestApp, httpApi, listen, type TestApp } from "../support/app.js";
import type { FakeCli } from "../support/fake-cli.js";
import { streamedReply } from "../support/fake-scenarios.js";
import { type Model, startModel } from "../support/models.js";
import { SseReader } from "../support/sse.js";
import { git, makeRepo, type TestRepo } from "../worktrees/repo.js";

// The run guarantees under hostile output and racing requests: every run ends with exactly one
// completion, the server stays up, and what the CLI wrote comes back as it wrote it.

/**
 * Posts a message and deletes its session at the same moment. Either the message got in first
 * (and the delete stopped its run) or it came too late: the delete succeeds either way.
 */
async function deleteWhileAdmitting(url: string, api: ReturnType<typeof httpApi>) {
  const session = await api.newSession();
  const [posted, deleted] = await Promise.all([
    api.postMessage(session.id, "go", { Prefer: "respond-async" }),
    fetch(`${url}/v1/sessions/${session.id}?force=true`, { method: "DELETE" }),
  ]);
  expect(deleted.status).toBe(204);
  expect([202, 404]).toContain(posted.status);
  return { session, posted };
}

describe.each(agentMatrix)("text from the CLI holding any character, $agent on $db", (agent) => {
  let model: Model;
  let t: TestApp;
  let server: { url: string; close(): Promise<void> };
  let api: ReturnType<typeof httpApi>;

  beforeAll(async () => {
    model = await startModel(agent.agent);
    // The default permission mode (acceptEdits) with an ordinary tenant's powers: claude's Bash is
    // denied, so the NUL reaches the model through the denial; codex runs the command.
    t = await createTestApp(agent.db, model.env);
    server = await listen(t.app);
    api = httpApi(server.url);
  });
  afterAll(async () => {
    await server.close();
    await t.close();
    await model.close();
  });

  it("a U+0000 in the agent's text is relayed, stored and returned intact; the server stays up", async () => {
    const text = "the output was a\u0000b, as printed";
    model.shell("printf 'a\\000b'");
    model.answer([text]);
    const session = await api.newSession();
    const res = await api.postMessage(
      session.id,
      "Run printf 'a\\000b' and tell me what it printed",
    );
    const runId = res.headers.get("x-run-id");
    const frames = await SseReader.of(res).events();
    expect(frames.filter((f) => f.event === "completion")).toHaveLength(1);
    expect(frames.at(-1)?.data).toMatchObject({ status: "succeeded", result: text });
    const deltas = frames.filter((f) => f.event === "text_delta");
    expect(deltas.map((f) => (f.data as { text: string }).text).join("")).toBe(text);

    const run = await (await fetch(`${server.url}/v1/runs/${runId}`)).json();
    expect(run).toMatchObject({ status: "succeeded", result: text, completion: { result: text } });
    const replay = await SseReader.of(
      await fetch(`${server.url}/v1/runs/${runId}/events`),
    ).events();
    expect(replay.map((f) => f.raw)).toEqual(frames.map((f) => f.raw));

    // The session takes its next message: nothing was left half-recorded.
    model.answer(["still here"]);
    const next = await (
      await api.postMessage(session.id, "again", { Accept: "application/json" })
    ).json();
    expect(next).toMatchObject({ completion: { status: "succeeded", result: "still here" } });
  });
});

describe.each(agentMatrix)("racing requests, $agent on $db", (agent) => {
  let fake: FakeCli;
  let t: TestApp;
  let server: { url: string; close(): Promise<void> };
  let api: ReturnType<typeof httpApi>;

  beforeAll(async () => {
    fake = await agent.fake(streamedReply(["quick"]));
    t = await createTestApp(agent.db, fake.bridgeEnv);
    server = await listen(t.app);
    api = httpApi(server.url);
  });
  afterAll(async () => {
    await server.close();
    await t.close();
    await fake.cleanup();
  });

  it("a cancel racing a run's end answers 200 and the run is cancelled, or 409 and it finished as it did", async () => {
    // The CLI has written its result but not exited yet: the outcome is known, the run not over.
    const lingering = await agent.fake({
      steps: [...streamedReply(["done"]).steps, { mark: "result" }],
      end: "hang",
    });
    const app = await createTestApp(agent.db, lingering.bridgeEnv);
    const served = await listen(app.app);
    try {
      const lingeringApi = httpApi(served.url);
      const session = await lingeringApi.newSession();
      const posted = await lingeringApi.postMessage(session.id, "go", { Prefer: "respond-async" });
      const { id } = (await posted.json()) as { id: string };
      await lingering.waitForMark("result");
      const cancel = await fetch(`${served.url}/v1/runs/${id}/cancel`, { method: "POST" });
      const run = await (await fetch(`${served.url}/v1/runs/${id}`)).json();
      const outcome = `${cancel.status} ${run.status} ${run.completion?.status}`;
      expect(["200 cancelled cancelled", "409 succeeded succeeded"]).toContain(outcome);
      const replay = await SseReader.of(await fetch(`${served.url}/v1/runs/${id}/events`)).events();
      expect(replay.filter((f) => f.event === "completion")).toHaveLength(1);
    } finally {
      await served.close();
      await app.close();
      await lingering.cleanup();
    }
  });

  it("a session deleted while a message is being admitted leaves no run behind and the server up", async () => {
    for (let i = 0; i < 10; i++) {
      const { session, posted } = await deleteWhileAdmitting(server.url, api);
      if (posted.status === 202) {
        const { id } = (await posted.json()) as { id: string };
        expect((await fetch(`${server.url}/v1/runs/${id}`)).status).toBe(404);
      }
      expect((await fetch(`${server.url}/v1/sessions/${session.id}`)).status).toBe(404);
    }
    expect((await fetch(`${server.url}/readyz`)).status).toBe(200);
  });
});

describe.each(agentMatrix)("a CLI that ignores SIGTERM, $agent on $db", (agent) => {
  it("the completion goes out when the outcome is known; the run's slot is free once its CLI is gone", async () => {
    // Says one thing, stops answering SIGTERM, and never writes again, not even when asked to end
    // its turn: stalled after 1 s, and its outcome known once that ask has had its grace.
    const stubborn = await agent.fake({
      steps: [{ init: true }, { ignoreSigterm: true }, { reply: { parts: ["thinking"] } }],
      end: "hang",
      ignoreInterrupt: true,
    });
    const app = await createTestApp(agent.db, {
      ...stubborn.bridgeEnv,
      AGENT_BRIDGE_IDLE_TIMEOUT_SECONDS: "1",
      AGENT_BRIDGE_MAX_CONCURRENT_RUNS: "1",
    });
    const served = await listen(app.app);
    const api = httpApi(served.url);
    try {
      const first = await api.postMessage((await api.newSession()).id, "go");
      // Queued behind the first run: the only slot is its until its CLI is gone.
      const second = await api.postMessage((await api.newSession()).id, "next");
      const reader = SseReader.of(first);
      await reader.events(2);
      const pid = (await stubborn.invocations())[0]?.pid ?? 0;
      expect(pid).toBeGreaterThan(0);
      const [completion] = await reader.events();
      expect(completion?.data).toMatchObject({ status: "failed" });
      // The answer did not wait for the kill: the CLI is still there, ignoring SIGTERM.
      expect(await groupAlive(pid)).toBe(true);
      const [started] = await SseReader.of(second).events(1);
      expect(started?.event).toBe("run_started");
      expect(await groupAlive(pid)).toBe(false);
    } finally {
      await served.close();
      await app.close();
      await stubborn.cleanup();
    }
  });
});

describe.each(agentMatrix)(
  "deleting a worktree session while its message starts, $agent on $db",
  (agent) => {
    let model: Model;
    let repo: TestRepo;
    let t: TestApp;
    let server: { url: string; close(): Promise<void> };
    let api: ReturnType<typeof httpApi>;

    beforeAll(async () => {
      model = await startModel(agent.agent, { defaultText: "working" });
      repo = await makeRepo();
      t = await createTestApp(agent.db, {
        ...model.env,
        AGENT_BRIDGE_WORK_DIR: repo.clone,
        AGENT_BRIDGE_WORKTREE_ENABLED: "true",
      });
      server = await listen(t.app);
      api = httpApi(server.url);
    });
    afterAll(async () => {
      await server.close();
      await t.close();
      await model.close();
      await repo.cleanup();
    });

    it("leaves neither the session's worktree nor its branch behind", async () => {
      for (let i = 0; i < 3; i++) await deleteWhileAdmitting(server.url, api);
      // A DELETE answers once the session's run is gone: a run outliving it would have made the
      // worktree again after the delete removed it.
      expect(git(repo.clone, "worktree", "list", "--porcelain")).not.toMatch(/worktrees/);
      expect(git(repo.clone, "branch", "--list", "worktree-*")).toBe("");
      expect((await fetch(`${server.url}/readyz`)).status).toBe(200);
    });
  },
);
