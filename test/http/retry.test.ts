import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueKey } from "../../src/auth/keys.js";
import type { CreateSession, Run } from "../../src/client/index.js";
import { createTestApp, type TestApp } from "../support/app.js";
import { appClient } from "../support/app-client.js";
import { BACKENDS } from "../support/db.js";
import { type FakeCli, fakeCli } from "../support/fake-cli.js";
import { longRun, streamedReply } from "../support/fake-scenarios.js";
import { SseReader } from "../support/sse.js";
import { result, systemInit } from "../support/stream-json-lines.js";

// POST /v1/runs/{id}/retry with the scripted fake CLI: which run may be retried, where its run
// resumes the conversation (the argv the CLI gets), and that it is answered as a message is.
// The real CLI's side (the failed turn gone from the model's view) is in
// test/runs/retry-usage.real.test.ts.

const FAILED_TURN = {
  steps: [
    { emit: systemInit() },
    { emit: result({ is_error: true, result: "API Error: 500 the API failed" }) },
  ],
};

describe.each(BACKENDS)("retrying a run on %s", (backend) => {
  let fake: FakeCli;
  let t: TestApp;
  let alice: string;
  let bob: string;

  beforeAll(async () => {
    fake = await fakeCli(streamedReply(["Hello"]));
    t = await createTestApp(backend, {
      ...fake.bridgeEnv,
      AGENT_BRIDGE_AUTH: "keys",
      // The fake stands in for codex too: its runs fail, which is all a refusal needs.
      AGENT_BRIDGE_AGENTS: "claude,codex",
      AGENT_BRIDGE_CODEX_BIN: fake.bin,
      AGENT_BRIDGE_CODEX_ENV_ALLOW: "FAKE_CLI_SCENARIO",
    });
    alice = (await issueKey(t.database.db, { name: "alice", admin: false })).key;
    bob = (await issueKey(t.database.db, { name: "bob", admin: false })).key;
  });
  afterAll(async () => {
    await t.close();
    await fake.cleanup();
  });

  const as = (key: string) => appClient(t.app, key);
  const newSession = async (key = alice, body: CreateSession = {}) =>
    (await as(key).createSession(body)).id;
  /** A message run to its end: its FinishedRun. */
  const send = (sessionId: string, text: string) => as(alice).send(sessionId, text);
  const retry = (runId: string, body: { text?: string } = {}, key = alice) =>
    as(key).POST("/v1/runs/{id}/retry", {
      params: { path: { id: runId } },
      body,
      headers: { Accept: "application/json" },
    });
  // The contract cannot tie the answer (200 FinishedRun or 202 Run) to `Prefer`: the test does.
  const retryAsync = (runId: string, idempotencyKey: string) =>
    as(alice).POST("/v1/runs/{id}/retry", {
      params: {
        path: { id: runId },
        header: { prefer: "respond-async", "idempotency-key": idempotencyKey },
      },
      body: {},
    });

  it("runs the session again from the last message a run before the retried one confirmed, with its prompt", async () => {
    const session = await newSession();
    await fake.setScenario(streamedReply(["First."], { uuid: "uuid-first" }));
    const first = await send(session, "remember apricot");
    expect(first.completion).toMatchObject({
      status: "succeeded",
      last_message_uuid: "uuid-first",
    });
    await fake.setScenario(FAILED_TURN);
    const failed = await send(session, "the prompt that failed");
    // A failed turn confirms no message: nothing of it is a place to resume at.
    expect(failed.completion).toMatchObject({ status: "failed", last_message_uuid: null });

    await fake.setScenario(streamedReply(["Retried."], { uuid: "uuid-retried" }));
    const { data, response } = await retry(failed.run.id);
    expect(response.status).toBe(200);
    expect(data).toMatchObject({
      run: { trigger: "retry", prompt: "the prompt that failed", status: "succeeded" },
      text: "Retried.",
    });
    const cli = await fake.record();
    expect(cli.args).toContain("--resume");
    expect(cli.args).toContain("--resume-session-at=uuid-first");
    expect(cli.stdin.at(-1)).toContain("the prompt that failed");
  });

  it("retries a succeeded run with new text, leaving that run's own turn out", async () => {
    const session = await newSession();
    await fake.setScenario(streamedReply(["One."], { uuid: "uuid-one" }));
    await send(session, "one");
    await fake.setScenario(streamedReply(["Two."], { uuid: "uuid-two" }));
    const second = await send(session, "two");
    const { data } = await retry(second.run.id, { text: "two, said better" });
    expect(data).toMatchObject({ run: { prompt: "two, said better" } });
    const cli = await fake.record();
    expect(cli.args).toContain("--resume-session-at=uuid-one");
    expect(cli.stdin.at(-1)).toContain("two, said better");
  });

  it("is answered as a message is: SSE in the asked view, 202 at once, and one run per Idempotency-Key", async () => {
    const session = await newSession();
    await fake.setScenario(streamedReply(["Hello"]));
    const done = await send(session, "hi");

    const { response: sse } = await as(alice).POST("/v1/runs/{id}/retry", {
      params: { path: { id: done.run.id }, query: { events: "full" } },
      body: {},
      parseAs: "stream",
    });
    expect(sse.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    const frames = await SseReader.of(sse).events();
    // The full view, numbered as it is: the init line's session events are there.
    expect(frames.map((f) => f.event)).toContain("session_status");
    expect(frames.map((f) => f.id)).toEqual(frames.map((_, i) => String(i + 1)));
    expect(frames[0]?.data).toMatchObject({ type: "run_started", trigger: "retry" });
    const retried = sse.headers.get("x-run-id") ?? "";

    const once = await retryAsync(retried, "retry-1");
    expect(once.response.status).toBe(202);
    const queued = once.data as Run;
    const again = await retryAsync(retried, "retry-1");
    expect((again.data as Run).id).toBe(queued.id);
  });

  it("refuses a run that is not its session's latest, one still going, and another key's run", async () => {
    const session = await newSession();
    await fake.setScenario(streamedReply(["Hello"]));
    const first = await send(session, "one");
    const second = await send(session, "two");
    const stale = await retry(first.run.id);
    expect(stale.response.status).toBe(409);
    expect(stale.response.headers.get("content-type")).toBe("application/problem+json");
    expect(stale.error).toMatchObject({
      code: "run_not_latest",
      detail: `run ${first.run.id} is not its session's latest run (${second.run.id} is): only the latest run can be retried`,
    });

    // Another key cannot even learn that the run exists.
    expect((await retry(second.run.id, {}, bob)).response.status).toBe(404);

    await fake.setScenario(longRun(60));
    const going = await as(alice).sendAsync(session, "slow");
    const busy = await retry(going.id);
    expect(busy.response.status).toBe(409);
    expect(busy.error).toMatchObject({ code: "session_busy", active_run_id: going.id });
    await as(alice).cancelRun(going.id);
  });

  it("refuses a codex session's run with 400 retry_unsupported, saying why", async () => {
    const session = await newSession(alice, { agent: "codex" });
    await fake.setScenario(streamedReply(["Hello"]));
    const run = await send(session, "hello codex");
    expect(run.run.status).toBe("failed");
    const { error, response } = await retry(run.run.id);
    expect(response.status).toBe(400);
    expect(error).toMatchObject({
      code: "retry_unsupported",
      detail:
        "Runs of a codex session cannot be retried: its CLI can only continue a conversation from its end, not from the message before the run",
    });
  });
});
