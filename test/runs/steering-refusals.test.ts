import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueKey } from "../../src/auth/keys.js";
import { ApiProblem, createClient } from "../../src/client/index.js";
import { cli } from "../cli/run-cli.js";
import { createTestApp, listen, type TestApp } from "../support/app.js";
import { BACKENDS } from "../support/db.js";
import { type FakeCli, fakeCli } from "../support/fake-cli.js";
import { streamedReply } from "../support/fake-scenarios.js";
import { SseReader } from "../support/sse.js";

// What steering refuses, and the queue as the client and the command line ask for it, against a
// served app with keys and the scripted fake CLI: a run that waits its turn takes no input nor
// switch (409 run_not_running), a switch outside the key's policy is a 403 policy_denied, and a
// codex run takes neither (409 input_unsupported, control_unsupported). Nothing refused is logged.

/** The problem a client call failed with. */
async function problem(call: Promise<unknown>): Promise<ApiProblem> {
  const err = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ApiProblem);
  return err as ApiProblem;
}

/** The run's whole log, once it is over. */
async function logOf(url: string, key: string, runId: string): Promise<string[]> {
  const res = await fetch(`${url}/v1/runs/${runId}/events?events=full`, {
    headers: { Authorization: `Bearer ${key}` },
  });
  return (await SseReader.of(res).events()).map((f) => f.event ?? "");
}

describe.each(BACKENDS)("steering refusals and the queue on %s", (backend) => {
  let dir: string;
  let release: string;
  let fake: FakeCli;
  let t: TestApp;
  let server: { url: string; close(): Promise<void> };
  let key: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "steering-refusals-"));
    release = join(dir, "release");
    // Each run says something, then waits until the test lets it end.
    fake = await fakeCli({
      steps: [
        { init: true },
        { reply: { parts: ["Working on it"] } },
        { mark: "held" },
        { waitFile: release },
        { succeed: {} },
      ],
    });
    t = await createTestApp(backend, { ...fake.bridgeEnv, AGENT_BRIDGE_AUTH: "keys" });
    server = await listen(t.app);
    const admin = (await issueKey(t.database.db, { name: "admin", admin: true })).key;
    // A key as a user gets one: made by the admin, with a policy.
    const res = await fetch(`${server.url}/v1/keys`, {
      method: "POST",
      headers: { Authorization: `Bearer ${admin}`, "Content-Type": "application/json" },
      body: JSON.stringify({
        name: "steerer",
        admin: false,
        models: ["claude-sonnet-4-5"],
        permission_modes: ["default", "plan"],
      }),
    });
    expect(res.status).toBe(201);
    key = ((await res.json()) as { key: string }).key;
  });
  afterAll(async () => {
    await writeFile(release, "");
    await server.close();
    await t.close();
    await fake.cleanup();
    await rm(dir, { recursive: true, force: true });
  });

  it("messages queued behind a live run (the client's whenBusy queue, send --queue) wait their turn; input and control to a waiting one are 409 run_not_running, and a switch outside the key's policy is 403 policy_denied; none is logged", async () => {
    const client = createClient({ baseUrl: server.url, key });
    const session = await client.createSession({
      model: "claude-sonnet-4-5",
      permission_mode: "default",
    });
    const live = await client.sendAsync(session.id, "first");
    await fake.waitForMark("held");
    const queued = await client.sendAsync(session.id, "second", { whenBusy: "queue" });
    expect(queued.status).toBe("queued");
    const sent = await cli(
      "--url",
      server.url,
      "--key",
      key,
      "send",
      "--session",
      session.id,
      "--queue",
      "--async",
      "third",
    );
    expect(sent.code).toBe(0);
    const third = sent.stdout.trim();
    expect((await client.getRun(third)).status).toBe("queued");

    // The waiting run: not running yet, so nothing to steer.
    const input = await problem(client.sendInput(queued.id, { text: "hurry" }));
    expect([input.status, input.code]).toEqual([409, "run_not_running"]);
    const control = await problem(client.controlRun(queued.id, { permission_mode: "plan" }));
    expect([control.status, control.code]).toEqual([409, "run_not_running"]);
    const typed = await cli("--url", server.url, "--key", key, "runs", "input", queued.id, "hi");
    expect(typed.code).not.toBe(0);
    expect(typed.stderr).toContain("run_not_running");

    // The live run: a model or a mode outside the key's policy is refused before its agent hears.
    const model = await problem(client.controlRun(live.id, { model: "claude-opus-4-1" }));
    expect([model.status, model.code]).toEqual([403, "policy_denied"]);
    const mode = await cli(
      "--url",
      server.url,
      "--key",
      key,
      "runs",
      "control",
      live.id,
      "--permission-mode",
      "acceptEdits",
    );
    expect(mode.code).not.toBe(0);
    expect(mode.stderr).toContain("policy_denied");

    await writeFile(release, "");
    const runs = [live.id, queued.id, third];
    for (const id of runs) {
      const events = await logOf(server.url, key, id);
      expect(events.at(-1)).toBe("completion");
      expect(events).not.toContain("user_input");
      expect(events).not.toContain("control");
    }
    // One at a time, in the order they were stored.
    const done = await Promise.all(runs.map((id) => client.getRun(id)));
    expect(done.map((r) => r.status)).toEqual(["succeeded", "succeeded", "succeeded"]);
    const times = done.map((r) => [
      Date.parse(r.started_at ?? ""),
      Date.parse(r.finished_at ?? ""),
    ]);
    expect(times[1]?.[0]).toBeGreaterThanOrEqual(times[0]?.[1] ?? Number.NaN);
    expect(times[2]?.[0]).toBeGreaterThanOrEqual(times[1]?.[1] ?? Number.NaN);
  });
});

describe.each(BACKENDS)("steering a codex run on %s", (backend) => {
  let fake: FakeCli;
  let t: TestApp;
  let server: { url: string; close(): Promise<void> };

  beforeAll(async () => {
    fake = await fakeCli(streamedReply(["Done."]), "codex");
    t = await createTestApp(backend, fake.bridgeEnv);
    server = await listen(t.app);
  });
  afterAll(async () => {
    await server.close();
    await t.close();
    await fake.cleanup();
  });

  it("is refused: 409 input_unsupported and control_unsupported, whatever its state, and nothing is logged", async () => {
    const client = createClient({ baseUrl: server.url });
    const session = await client.createSession({ agent: "codex" });
    const run = await client.sendAsync(session.id, "hello");
    const input = await problem(client.sendInput(run.id, { text: "more" }));
    expect([input.status, input.code]).toEqual([409, "input_unsupported"]);
    const control = await problem(client.controlRun(run.id, { model: "gpt-5" }));
    expect([control.status, control.code]).toEqual([409, "control_unsupported"]);
    const typed = await cli("--url", server.url, "runs", "control", run.id, "--model", "gpt-5");
    expect(typed.code).not.toBe(0);
    expect(typed.stderr).toContain("control_unsupported");
    const events = await logOf(server.url, "", run.id);
    expect(events.at(-1)).toBe("completion");
    expect(events).not.toContain("user_input");
    expect(events).not.toContain("control");
  });
});
