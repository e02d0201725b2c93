import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueKey } from "../../src/auth/keys.js";
import type { CreateSession } from "../../src/client/index.js";
import { sessions } from "../../src/store/schema.js";
import { cli } from "../cli/run-cli.js";
import { createTestApp, listen, type TestApp } from "../support/app.js";
import { appClient } from "../support/app-client.js";
import { BACKENDS } from "../support/db.js";
import { type FakeCli, fakeCli } from "../support/fake-cli.js";
import { longRun, streamedReply } from "../support/fake-scenarios.js";
import { runCommand } from "../support/process.js";
import { codeBlocks, docSection } from "../support/readme.js";
import { SseReader } from "../support/sse.js";
import { result, systemInit } from "../support/stream-json-lines.js";

// POST /v1/sessions/{id}/fork with the scripted fake CLI: what the fork takes of its session,
// the command its first and later runs give the CLI, and every refusal. What the model then sees
// (the real CLI's side) is in test/sessions/fork.real.test.ts.

const FAILED_TURN = {
  steps: [
    { emit: systemInit() },
    { emit: result({ is_error: true, result: "API Error: 500 the API failed" }) },
  ],
};

describe.each(BACKENDS)("forking a session on %s", (backend) => {
  let fake: FakeCli;
  let t: TestApp;
  let alice: string;
  let bob: string;

  beforeAll(async () => {
    fake = await fakeCli(streamedReply(["Hello"]));
    t = await createTestApp(backend, {
      ...fake.bridgeEnv,
      AGENT_BRIDGE_AUTH: "keys",
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
  const newSession = async (body: CreateSession = {}) => (await as(alice).createSession(body)).id;
  const send = (sessionId: string, text: string) => as(alice).send(sessionId, text);
  const fork = (id: string, body: { at_run?: string; title?: string } = {}, key = alice) =>
    as(key).POST("/v1/sessions/{id}/fork", { params: { path: { id } }, body });

  it("makes a session with the original's settings and owner that starts as a fork of the conversation at the run's last message", async () => {
    const original = await as(alice).createSession({
      title: "original",
      permission_mode: "plan",
      effort: "high",
      model: "claude-test-model",
      max_turns: 7,
      approvals: "api",
      approval_timeout_seconds: 60,
      metadata: { team: "a" },
    });
    await fake.setScenario(streamedReply(["One."], { uuid: "uuid-one" }));
    const one = await send(original.id, "one");
    await fake.setScenario(streamedReply(["Two."], { uuid: "uuid-two" }));
    await send(original.id, "two");

    const { data, response } = await fork(original.id, { at_run: one.run.id });
    expect(response.status).toBe(201);
    const forked = data as NonNullable<typeof data>;
    expect(response.headers.get("location")).toBe(`/v1/sessions/${forked.id}`);
    expect(forked.id).not.toBe(original.id);
    expect(forked).toMatchObject({
      title: "original",
      permission_mode: "plan",
      effort: "high",
      model: "claude-test-model",
      max_turns: 7,
      approvals: "api",
      approval_timeout_seconds: 60,
      metadata: { team: "a" },
      agent_session_id: null,
      forked_from: { session_id: original.id, run_id: one.run.id },
      usage: { runs: 0, cost_usd: 0 },
    });
    // The live feed's `session_created` names the session it was forked from.
    const feed = await t.app.request(`/v1/events?after=0&follow=false&session_id=${forked.id}`, {
      headers: { Authorization: `Bearer ${alice}` },
    });
    expect((await SseReader.of(feed).events()).map((f) => f.data)).toEqual([
      expect.objectContaining({
        type: "session_created",
        session_id: forked.id,
        forked_from: original.id,
      }),
    ]);
    // The owner's: alice lists it, bob cannot see it.
    expect((await as(alice).getSession(forked.id)).forked_from?.run_id).toBe(one.run.id);
    expect((await fork(forked.id, {}, bob)).response.status).toBe(404);

    await fake.setScenario(streamedReply(["Forked."], { uuid: "uuid-fork" }));
    await send(forked.id, "the other way");
    const first = await fake.record();
    // The original's conversation as its CLI named it (the fake names every one alike).
    const { agent_session_id } = await as(alice).getSession(original.id);
    expect(first.args).toEqual(
      expect.arrayContaining([
        `--resume=${agent_session_id}`,
        "--fork-session",
        `--session-id=${forked.id}`,
        "--resume-session-at=uuid-one",
      ]),
    );
    await send(forked.id, "and on");
    const second = await fake.record();
    expect(second.args.join(" ")).toContain(`--resume ${forked.id}`);
    expect(second.args).not.toContain("--fork-session");
  });

  it("forks at the newest finished run by default, also while the session has a run going, and takes a title of its own", async () => {
    const original = await newSession();
    await fake.setScenario(streamedReply(["Done."], { uuid: "uuid-done" }));
    const done = await send(original, "done");
    await fake.setScenario(longRun(60));
    const going = await as(alice).sendAsync(original, "slow");

    const { data, response } = await fork(original, { title: "the fork" });
    expect(response.status).toBe(201);
    expect(data).toMatchObject({
      title: "the fork",
      forked_from: { session_id: original, run_id: done.run.id },
    });

    // The run going is not a place to branch after.
    const open = await fork(original, { at_run: going.id });
    expect(open.response.status).toBe(409);
    expect(open.error).toMatchObject({ code: "run_not_finished", active_run_id: going.id });
    await as(alice).cancelRun(going.id);
  });

  it("branches after the last good message when the run named failed, and refuses when none is", async () => {
    const original = await newSession();
    await fake.setScenario(FAILED_TURN);
    const failedFirst = await send(original, "fails");
    const none = await fork(original, { at_run: failedFirst.run.id });
    expect(none.response.status).toBe(409);
    expect(none.error).toMatchObject({ code: "no_fork_point" });

    await fake.setScenario(streamedReply(["Good."], { uuid: "uuid-good" }));
    await send(original, "good");
    await fake.setScenario(FAILED_TURN);
    const failed = await send(original, "fails again");
    const { data } = await fork(original, { at_run: failed.run.id });
    await fake.setScenario(streamedReply(["Forked."]));
    await send(data?.id ?? "", "go");
    expect((await fake.record()).args).toContain("--resume-session-at=uuid-good");
  });

  it("refuses runs not of the session, a session with no finished run, another key's session, an expired one and a codex one", async () => {
    const original = await newSession();
    const other = await newSession();
    const empty = await fork(original);
    expect(empty.response.status).toBe(409);
    expect(empty.error).toMatchObject({ code: "no_fork_point" });

    await fake.setScenario(streamedReply(["Hi."], { uuid: "uuid-hi" }));
    const elsewhere = await send(other, "hi");
    await send(original, "hi");
    const notHers = await fork(original, { at_run: elsewhere.run.id });
    expect(notHers.response.status).toBe(404);
    expect(notHers.response.headers.get("content-type")).toBe("application/problem+json");
    expect(notHers.error).toMatchObject({
      code: "run_not_found",
      errors: [{ location: "body", path: "at_run" }],
    });
    const unknown = await fork(original, { at_run: "00000000-0000-4000-8000-000000000000" });
    expect(unknown.error).toMatchObject({ code: "run_not_found" });
    const bad = await fork(original, { at_run: "not\u0000a-uuid" });
    expect(bad.response.status).toBe(400);
    expect(bad.error).toMatchObject({ code: "validation_failed" });

    expect((await fork(original, {}, bob)).error).toMatchObject({ code: "session_not_found" });

    await t.database.db
      .update(sessions)
      .set({ expiredAt: new Date() })
      .where(eq(sessions.id, other));
    const expired = await fork(other);
    expect(expired.response.status).toBe(410);
    expect(expired.error).toMatchObject({ code: "session_expired" });

    const codex = await newSession({ agent: "codex" });
    await send(codex, "hello codex");
    const refused = await fork(codex);
    expect(refused.response.status).toBe(400);
    expect(refused.error).toMatchObject({
      code: "fork_unsupported",
      detail:
        "A codex session cannot be forked: the bridge cannot start its CLI's conversation as a copy of another's up to a given message",
    });
  });

  it("forks as the curl in docs/conversations.md's Fork section shows", async () => {
    const [block] = codeBlocks(await docSection("docs/conversations.md", "Fork"), "sh");
    const curl = block?.split("\n").find((line) => line.startsWith("curl")) ?? "";
    const original = await newSession();
    await fake.setScenario(streamedReply(["One."], { uuid: "uuid-doc" }));
    const one = await send(original, "one");
    const server = await listen(t.app);
    try {
      const vars = [`B=${server.url}`, `H="Authorization: Bearer ${alice}"`];
      vars.push(`S=${original}`, `R=${one.run.id}`);
      const res = await runCommand("bash", ["-c", [...vars, curl].join("\n")], {
        env: { PATH: process.env.PATH },
      });
      expect(JSON.parse(res.stdout)).toMatchObject({
        title: "the other way",
        forked_from: { session_id: original, run_id: one.run.id },
      });
    } finally {
      await server.close();
    }
  });

  it("agent-bridge sessions fork ID --at-run RUN prints the new session's id", async () => {
    const original = await newSession();
    await fake.setScenario(streamedReply(["One."], { uuid: "uuid-cli" }));
    const one = await send(original, "one");
    const server = await listen(t.app);
    try {
      const res = await cli(
        "--url",
        server.url,
        "--key",
        alice,
        "sessions",
        "fork",
        original,
        "--at-run",
        one.run.id,
      );
      expect(res.code).toBe(0);
      const id = res.stdout.trim();
      expect(await as(alice).getSession(id)).toMatchObject({
        forked_from: { session_id: original, run_id: one.run.id },
      });
    } finally {
      await server.close();
    }
  });
});
