import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueKey } from "../../src/auth/keys.js";
import { insertPermissionRequest, listPermissionRequests } from "../../src/store/permissions.js";
import { markRunning } from "../../src/store/run-lifecycle.js";
import { createTestApp, requestAs, type TestApp } from "../support/app.js";
import { BACKENDS, insertRun } from "../support/db.js";
import { type FakeCli, fakeCli } from "../support/fake-cli.js";
import { ManualClock } from "../support/manual-clock.js";
import { type Frame, SseReader } from "../support/sse.js";
import { controlRequest, result, systemInit } from "../support/stream-json-lines.js";

// Permission requests where the real CLI cannot be made to do it on demand: withdraw a request it
// asked for (`control_cancel_request`: the scripted fake CLI asks, waits for the test's go,
// withdraws), or be left by a server that died; and what the audit trail of answers keeps, on
// each database.

describe.each(BACKENDS)("permission requests withdrawn or left behind on %s", (backend) => {
  let dir: string;
  let fake: FakeCli;
  let t: TestApp;
  const go = () => join(dir, "go");

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "approvals-"));
    fake = await fakeCli({
      steps: [
        { emit: systemInit() },
        { emit: controlRequest("req_w", "Bash", { command: "make deploy" }, "toolu_w") },
        { waitFile: go() },
        { emit: { type: "control_cancel_request", request_id: "req_w" } },
        { emit: result({ result: "Gave up." }) },
      ],
    });
    t = await createTestApp(backend, fake.bridgeEnv);
  });
  afterAll(async () => {
    await t.close();
    await fake.cleanup();
    await rm(dir, { recursive: true, force: true });
  });

  it("shows permission_cancelled, marks the request cancelled and writes the CLI no answer", async () => {
    const session = await (
      await t.app.request("/v1/sessions", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ approvals: "api" }),
      })
    ).json();
    const res = await t.app.request(`/v1/sessions/${session.id}/messages`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ text: "deploy" }),
    });
    const runId = res.headers.get("x-run-id");
    const sse = SseReader.of(res);
    const frames: Frame[] = [];
    while (frames.at(-1)?.event !== "permission_request") frames.push(...(await sse.events(1)));
    // Answers are for a question; this request is a tool's: a 400 that changes nothing.
    const mismatched = await t.app.request(`/v1/runs/${runId}/permissions/req_w`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ answers: { "Deploy?": "yes" } }),
    });
    expect(mismatched.status).toBe(400);
    expect(await mismatched.json()).toMatchObject({
      code: "validation_failed",
      errors: [{ location: "body", path: "answers" }],
    });
    const pending = await (await t.app.request(`/v1/runs/${runId}/permissions`)).json();
    expect(pending.data).toEqual([expect.objectContaining({ state: "pending" })]);
    await writeFile(go(), "");
    frames.push(...(await sse.events()));
    expect(frames.map((f) => f.event).slice(1)).toEqual([
      "permission_request",
      "permission_cancelled",
      "text_delta",
      "completion",
    ]);
    expect(frames[2]?.data).toEqual({ type: "permission_cancelled", request_id: "req_w" });
    const listed = await (await t.app.request(`/v1/runs/${runId}/permissions`)).json();
    expect(listed.data).toEqual([
      expect.objectContaining({ request_id: "req_w", state: "cancelled", by: "cancel" }),
    ]);
    const record = await fake.record();
    expect(record.stdin.filter((line) => line.includes("req_w"))).toEqual([]);
  });

  it("a run left by a server that died has its pending requests closed as cancelled when reaped", async () => {
    const { db } = t.database;
    const session = await (
      await t.app.request("/v1/sessions", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ approvals: "api" }),
      })
    ).json();
    // As a server of a version before instances left it: running, with a request waiting. Made
    // running in the transaction that writes it: on Postgres an instance looking for work (as this
    // app's does whenever a run of its own ends) claims a queued run nobody owns, and reaping then
    // found none.
    const run = await db.transaction(async (tx) => {
      const row = await insertRun(tx, {
        sessionId: session.id,
        instanceId: null,
        agent: "claude",
        trigger: "message",
        prompt: "deploy",
        systemPrompt: null,
        idempotencyKey: null,
        requestHash: null,
      });
      await markRunning(tx, row.id, new Date());
      return row;
    });
    await t.deps.runs.pullWork();
    const now = new Date();
    await insertPermissionRequest(db, {
      runId: run.id,
      requestId: "req_left",
      toolName: "Bash",
      toolUseId: "toolu_left",
      input: { command: "make deploy" },
      suggestions: [],
      createdAt: now,
      expiresAt: new Date(now.getTime() + 600_000),
    });
    expect((await (await t.app.request(`/v1/runs/${run.id}`)).json()).status).toBe(
      "awaiting_approval",
    );
    expect(await t.deps.runs.reap(null)).toBe(1);
    expect(await listPermissionRequests(db, run.id)).toEqual([
      expect.objectContaining({ requestId: "req_left", state: "cancelled", by: "cancel" }),
    ]);
    expect((await (await t.app.request(`/v1/runs/${run.id}`)).json()).status).toBe("interrupted");
  });
});

describe.each(BACKENDS)("the audit trail of answers on %s", (backend) => {
  let fake: FakeCli;
  let t: TestApp;

  beforeAll(async () => {
    // Two requests in turn, each waiting for its answer on stdin.
    fake = await fakeCli({
      steps: [
        { emit: systemInit() },
        { emit: controlRequest("req_changed", "Bash", { command: "make deploy" }, "toolu_1") },
        { waitStdin: "control_response" },
        { emit: controlRequest("req_same", "Bash", { command: "make test" }, "toolu_2") },
        { waitStdin: "control_response" },
        { emit: result({ result: "Done." }) },
      ],
    });
    t = await createTestApp(backend, { ...fake.bridgeEnv, AGENT_BRIDGE_AUTH: "keys" });
  });
  afterAll(async () => {
    await t.close();
    await fake.cleanup();
  });

  it("an allow that changed the input shows the input that ran and the key that answered, in permission_resolved and the list; one that did not change it shows no updated_input", async () => {
    const { key, row: keyRow } = await issueKey(t.database.db, { name: "ops", admin: false });
    const json = (body: unknown) => ({
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
    const session = await (
      await requestAs(t.app, key, "/v1/sessions", json({ approvals: "api" }))
    ).json();
    const res = await requestAs(
      t.app,
      key,
      `/v1/sessions/${session.id}/messages`,
      json({ text: "deploy" }),
    );
    const runId = res.headers.get("x-run-id");
    const sse = SseReader.of(res);
    const frames: Frame[] = [];
    const until = async (event: string, n: number) => {
      while (frames.filter((f) => f.event === event).length < n) {
        frames.push(...(await sse.events(1)));
      }
    };
    const answer = (requestId: string, body: unknown) =>
      requestAs(t.app, key, `/v1/runs/${runId}/permissions/${requestId}`, json(body));

    await until("permission_request", 1);
    const changed = { command: "make deploy-staging" };
    const first = await answer("req_changed", { decision: "allow", updated_input: changed });
    expect(first.status).toBe(200);
    expect(await first.json()).toMatchObject({
      request_id: "req_changed",
      input: { command: "make deploy" },
      state: "allowed",
      by: "client",
      key_id: keyRow.id,
      updated_input: changed,
    });
    await until("permission_request", 2);
    // The input as asked, sent back as it was: nothing changed, so nothing to show.
    const same = await answer("req_same", {
      decision: "allow",
      updated_input: { command: "make test" },
    });
    expect(same.status).toBe(200);
    expect(await same.json()).not.toHaveProperty("updated_input");
    frames.push(...(await sse.events()));

    expect(frames.filter((f) => f.event === "permission_resolved").map((f) => f.data)).toEqual([
      {
        type: "permission_resolved",
        request_id: "req_changed",
        decision: "allow",
        scope: "once",
        by: "client",
        updated_input: changed,
        key_id: keyRow.id,
      },
      {
        type: "permission_resolved",
        request_id: "req_same",
        decision: "allow",
        scope: "once",
        by: "client",
        key_id: keyRow.id,
      },
    ]);
    expect(frames.at(-1)?.data).toMatchObject({ type: "completion", status: "succeeded" });
    // The CLI got the changed input.
    const answers = (await fake.record()).stdin
      .map((line) => JSON.parse(line))
      .filter((line) => line.type === "control_response")
      .map((line) => line.response.response);
    expect(answers).toEqual([
      { behavior: "allow", updatedInput: changed },
      { behavior: "allow", updatedInput: { command: "make test" } },
    ]);
    const listed = await (await requestAs(t.app, key, `/v1/runs/${runId}/permissions`)).json();
    expect(listed.data).toHaveLength(2);
    const [changedRow, sameRow] = listed.data;
    expect(changedRow).toMatchObject({
      request_id: "req_changed",
      input: { command: "make deploy" },
      state: "allowed",
      updated_input: changed,
      key_id: keyRow.id,
    });
    expect(sameRow).toMatchObject({ request_id: "req_same", state: "allowed", key_id: keyRow.id });
    expect(sameRow).not.toHaveProperty("updated_input");
  });
});

/** The run's timeout: its own work takes far less, the wait for an answer longer. */
const RUN_TIMEOUT_SECONDS = 4;

describe.each(BACKENDS)("a request left unanswered past the run's timeout on %s", (backend) => {
  let fake: FakeCli;
  let t: TestApp;
  // The approvals' time; the run's own timeout is the driver's, on the wall clock.
  const clock = new ManualClock();

  beforeAll(async () => {
    fake = await fakeCli({
      steps: [
        { emit: systemInit() },
        { emit: controlRequest("req_late", "Bash", { command: "make deploy" }, "toolu_late") },
        { waitStdin: "control_response" },
        { emit: result({ result: "Nobody answered." }) },
      ],
    });
    t = await createTestApp(
      backend,
      { ...fake.bridgeEnv, AGENT_BRIDGE_RUN_TIMEOUT_SECONDS: String(RUN_TIMEOUT_SECONDS) },
      clock,
    );
  });
  afterAll(async () => {
    await t.close();
    await fake.cleanup();
  });

  /** A message in a session whose requests wait `approvalTimeoutSeconds`: its run's stream. */
  async function runWaiting(approvalTimeoutSeconds: number) {
    const post = (path: string, body: unknown) =>
      t.app.request(path, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body),
      });
    const session = await (
      await post("/v1/sessions", {
        approvals: "api",
        approval_timeout_seconds: approvalTimeoutSeconds,
      })
    ).json();
    const res = await post(`/v1/sessions/${session.id}/messages`, { text: "deploy" });
    return { runId: res.headers.get("x-run-id") ?? "", stream: SseReader.of(res) };
  }

  const resolvedIn = (frames: Frame[]) => frames.find((f) => f.event === "permission_resolved");

  it("is denied by its approval timeout, not a moment before, and the run goes on with the denial", async () => {
    const { runId, stream } = await runWaiting(5);
    const asked = (await stream.until("permission_request")).at(-1)?.data;
    const askedAt = clock.now();
    expect(asked).toMatchObject({
      request_id: "req_late",
      expires_at: new Date(askedAt + 5_000).toISOString(),
    });
    await clock.advance(4_999);
    expect(await listPermissionRequests(t.database.db, runId)).toMatchObject([
      { requestId: "req_late", state: "pending" },
    ]);
    await clock.advance(1);
    const frames = await stream.events();
    expect(resolvedIn(frames)?.data).toMatchObject({
      request_id: "req_late",
      decision: "deny",
      by: "timeout",
    });
    expect(frames.at(-1)?.data).toMatchObject({ status: "succeeded", result: "Nobody answered." });
    expect(await listPermissionRequests(t.database.db, runId)).toMatchObject([
      { requestId: "req_late", state: "expired" },
    ]);
  });

  it("stops the wall clock while it waits, for as long again at most: a run whose request may wait a day ends timed_out at twice its timeout", async () => {
    const started = performance.now();
    const { stream } = await runWaiting(86_400);
    const frames = await stream.events();
    expect(resolvedIn(frames)?.data).toMatchObject({ request_id: "req_late", by: "cancel" });
    expect(frames.at(-1)?.data).toMatchObject({ status: "timed_out" });
    // Cut at its own timeout had its clock not stopped while the request waited.
    expect(performance.now() - started).toBeGreaterThan(1.5 * RUN_TIMEOUT_SECONDS * 1000);
  });
});
