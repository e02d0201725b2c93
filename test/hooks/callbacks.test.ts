import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildHookWorkers } from "../../src/app.js";
import type { CallbackOutbox } from "../../src/hooks/outbox.js";
import { createTestApp, listen, type TestApp } from "../support/app.js";
import { type Cleanups, undo } from "../support/cleanups.js";
import { BACKENDS, serverDatabases } from "../support/db.js";
import { type FakeCli, fakeCli } from "../support/fake-cli.js";
import { streamedReply } from "../support/fake-scenarios.js";
import { ManualClock } from "../support/manual-clock.js";
import { startServer } from "../support/server.js";
import {
  createHook,
  deliver,
  getRun,
  newStandardSecret,
  type ReceivedCallback,
  type Receiver,
  standardSignature,
  startReceiver,
  until,
} from "./support.js";

// Callbacks: the outcome of a hook's run POSTed to its callback URL from the durable outbox,
// signed the Standard Webhooks way, retried on failure and timeout, and never after a 2xx. In one
// process the outbox runs on a manual clock: an attempt goes out when the test moves time to it.

const SECRET = "bearer-secret-0123456789";
const CALLBACK_ENV = {
  AGENT_BRIDGE_CALLBACK_BACKOFF_MIN_MS: "100",
  AGENT_BRIDGE_CALLBACK_BACKOFF_MAX_MS: "400",
  AGENT_BRIDGE_CALLBACK_TIMEOUT_MS: "500",
  AGENT_BRIDGE_CALLBACK_POLL_MS: "100",
  AGENT_BRIDGE_CALLBACK_MAX_ATTEMPTS: "4",
};

/** Past any retry's backoff (at most AGENT_BRIDGE_CALLBACK_BACKOFF_MAX_MS). */
const LATER_MS = 1_000;

const headers = { "Content-Type": "application/json", Authorization: `Bearer ${SECRET}` };

/** Checks a received callback the way a receiver following the spec would. */
function verifies(callback: ReceivedCallback, secret: string): boolean {
  const id = String(callback.headers["webhook-id"]);
  const timestamp = Number(callback.headers["webhook-timestamp"]);
  const expected = standardSignature(secret, id, timestamp, callback.body);
  return (
    Math.abs(Date.now() / 1000 - timestamp) < 300 &&
    String(callback.headers["webhook-signature"]).split(" ").includes(expected)
  );
}

describe.each(BACKENDS)("callbacks on %s", (backend) => {
  let fake: FakeCli;
  let t: TestApp;
  let outbox: CallbackOutbox;
  let server: { url: string; close(): Promise<void> };
  const receivers: Receiver[] = [];
  let clock: ManualClock;

  beforeAll(async () => {
    fake = await fakeCli(streamedReply(["All ", "good."]));
    clock = new ManualClock();
    t = await createTestApp(backend, { ...fake.bridgeEnv, ...CALLBACK_ENV }, clock);
    ({ outbox } = buildHookWorkers(t.deps));
    outbox.start();
    server = await listen(t.app);
  });
  afterAll(async () => {
    await server.close();
    await outbox.stop();
    await t.close();
    await fake.cleanup();
    for (const r of receivers) await r.close();
  });

  async function hookWithReceiver(name: string, plan?: Receiver["plan"]) {
    const receiver = await startReceiver(plan);
    receivers.push(receiver);
    const callbackSecret = newStandardSecret();
    await createHook(server.url, {
      name,
      verification: "bearer",
      secret: SECRET,
      prompt_template: "Check {{payload.sha}}",
      callback_url: receiver.url,
      callback_secret: callbackSecret,
    });
    return { receiver, callbackSecret };
  }

  async function fire(name: string): Promise<string> {
    const res = await deliver(server.url, name, JSON.stringify({ sha: "abc123" }), headers);
    expect(res.status).toBe(202);
    return (await res.json()).run_id;
  }

  /**
   * Waits for the run's completion, which makes its callback due at the wall clock's time, and
   * moves the outbox's time there unless it is past it (then the completion's own pass tried it);
   * resolves once a pass then has finished.
   */
  async function firstAttempt(runId: string) {
    const due = await until(async () => {
      const { callback } = await getRun(server.url, runId);
      return callback?.next_attempt_at ? callback : undefined;
    });
    if (due.attempts > 0) await outbox.poke();
    else await at(Math.max(clock.now(), Date.parse(due.next_attempt_at ?? "")));
  }

  /** The run's callback as it stands. */
  const callbackOf = async (runId: string) => (await getRun(server.url, runId)).callback;

  /**
   * Moves the outbox's time to `offsetMs` from `time` (ms, or a callback's `next_attempt_at`);
   * resolves once a pass at that time has finished.
   */
  async function at(time: number | string | null | undefined, offsetMs = 0) {
    await clock.advanceTo((typeof time === "number" ? time : Date.parse(time ?? "")) + offsetMs);
    await outbox.poke();
  }

  it("reaches the receiver with {run, completion, text}, signed so that it verifies, once", async () => {
    const { receiver, callbackSecret } = await hookWithReceiver("cb-ok");
    const runId = await fire("cb-ok");
    await firstAttempt(runId);
    const [callback] = receiver.received;
    if (!callback) throw new Error("no callback");
    expect(callback.headers["content-type"]).toBe("application/json");
    expect(callback.headers["webhook-id"]).toBe(runId);
    expect(verifies(callback, callbackSecret)).toBe(true);
    expect(verifies(callback, newStandardSecret())).toBe(false);
    const body = JSON.parse(callback.body);
    expect(body).toMatchObject({
      run: { id: runId, status: "succeeded", trigger: "webhook", prompt: "Check abc123" },
      completion: { type: "completion", status: "succeeded", result: "All good." },
      text: "All good.",
    });
    expect(body.run).not.toHaveProperty("callback");

    expect(await callbackOf(runId)).toMatchObject({
      state: "delivered",
      attempts: 1,
      last_status: 200,
    });
    // A pass of the outbox well after the delivery sends nothing more.
    await at(clock.now(), LATER_MS);
    expect(receiver.received).toHaveLength(1);
  });

  it("retries after a 500 and after a timeout, with the same bytes, and stops at the 2xx", async () => {
    const plan: Receiver["plan"] = (n) =>
      n === 1 ? { status: 500 } : n === 2 ? { status: 200, delayMs: 1500 } : { status: 204 };
    const { receiver, callbackSecret } = await hookWithReceiver("cb-retry", plan);
    const runId = await fire("cb-retry");
    await firstAttempt(runId);
    const afterFirst = await callbackOf(runId);
    expect(afterFirst).toMatchObject({ state: "pending", attempts: 1, last_error: "http_500" });
    // Backoff: the retry falls due between half the minimum and the minimum after the failure.
    const backoff = Date.parse(afterFirst?.next_attempt_at ?? "") - clock.now();
    expect(backoff).toBeGreaterThanOrEqual(50);
    expect(backoff).toBeLessThanOrEqual(100);
    await at(afterFirst?.next_attempt_at, -1);
    expect(receiver.received).toHaveLength(1);

    await at(afterFirst?.next_attempt_at);
    const afterSecond = await callbackOf(runId);
    expect(afterSecond).toMatchObject({ state: "pending", attempts: 2, last_error: "timeout" });
    await at(afterSecond?.next_attempt_at);
    expect(await callbackOf(runId)).toMatchObject({
      state: "delivered",
      attempts: 3,
      last_status: 204,
      last_error: null,
    });
    expect(receiver.received).toHaveLength(3);
    const [first, second, third] = receiver.received;
    if (!first || !second || !third) throw new Error("three callbacks expected");
    expect(second.body).toBe(first.body);
    expect(third.body).toBe(first.body);
    for (const callback of receiver.received) expect(verifies(callback, callbackSecret)).toBe(true);
    await at(clock.now(), LATER_MS);
    expect(receiver.received).toHaveLength(3);
  });

  it("gives up after the configured attempts and says so on the run", async () => {
    const { receiver } = await hookWithReceiver("cb-down", () => ({ status: 503 }));
    const runId = await fire("cb-down");
    await firstAttempt(runId);
    for (let attempts = 1; attempts <= 4; attempts++) {
      if (attempts > 1) await at((await callbackOf(runId))?.next_attempt_at);
      const callback = await callbackOf(runId);
      expect(callback).toMatchObject({
        state: attempts < 4 ? "pending" : "failed",
        attempts,
        last_status: 503,
        last_error: "http_503",
      });
    }
    await at(clock.now(), LATER_MS);
    expect(receiver.received).toHaveLength(4);
  });

  it("shows no callback on a run of a hook without one, nor on a message's run", async () => {
    const session = await (await fetch(`${server.url}/v1/sessions`, { method: "POST" })).json();
    const res = await fetch(`${server.url}/v1/sessions/${session.id}/messages`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify({ text: "hi" }),
    });
    expect((await res.json()).run.callback).toBeNull();
  });
});

// The outbox is in the database: a server that dies between attempts leaves the callback to the
// next one, which goes on counting, and a delivered callback is never sent again.

const cleanups: Cleanups = [];
afterAll(async () => {
  await undo(cleanups);
});

const databases = serverDatabases();
afterAll(() => databases.cleanup());

/** No wait of its own: the test's timeout is the one bound. */
const NO_DEADLINE = Number.POSITIVE_INFINITY;

describe.each(databases.targets)("callbacks across a restart on %s", (_name, database) => {
  let target: Record<string, string>;
  beforeAll(async () => {
    // Not a first start's initdb (the data dir is seeded): what is under test is the restart.
    target = await database();
  });

  it("resumes after the server is killed, and stops after the 2xx", async () => {
    const fake = await fakeCli(streamedReply(["Done."]));
    cleanups.push(fake.cleanup);
    let up = false;
    const answers: number[] = [];
    const receiver = await startReceiver(() => {
      answers.push(up ? 200 : 500);
      return { status: up ? 200 : 500 };
    });
    cleanups.push(receiver.close);
    const env = {
      ...target,
      ...fake.bridgeEnv,
      ...CALLBACK_ENV,
      AGENT_BRIDGE_CALLBACK_BACKOFF_MIN_MS: "300",
      AGENT_BRIDGE_CALLBACK_BACKOFF_MAX_MS: "600",
      AGENT_BRIDGE_CALLBACK_MAX_ATTEMPTS: "50",
    };
    const first = await startServer(env);
    cleanups.push(async () => void (await first.stop("SIGKILL")));
    await createHook(first.url, {
      name: "restart",
      verification: "bearer",
      secret: SECRET,
      prompt_template: "go",
      callback_url: receiver.url,
      callback_secret: newStandardSecret(),
    });
    const res = await deliver(first.url, "restart", "{}", headers);
    const runId = (await res.json()).run_id;
    // Killed between attempts: after the second failure is recorded, during its backoff. Each
    // wait is on what the processes say, with no deadline of its own: under load a server's start
    // alone can take tens of seconds, and only the test's timeout bounds the whole.
    const recordedFailure = /"msg":"callback failed; will retry"/g;
    await first.waitForOutput(new RegExp(`(${recordedFailure.source}[^]*){2}`), NO_DEADLINE);
    await first.stop("SIGKILL");
    const failedAttempts = first.output().match(recordedFailure)?.length ?? 0;
    // An attempt the first server sent before it died is answered as a failure, even when the
    // receiver reads it only now.
    await receiver.idle();
    up = true;
    const second = await startServer(env);
    cleanups.push(async () => void (await second.stop("SIGKILL")));
    await second.waitForOutput(/"msg":"callback delivered"/, NO_DEADLINE);
    const run = await getRun(second.url, runId);
    expect(run.callback).toMatchObject({ state: "delivered", last_status: 200 });
    expect(run.callback?.attempts).toBeGreaterThan(failedAttempts);
    // A delivered callback is never due again (the outbox takes only pending ones); once the
    // server has stopped, nothing more can have been sent: the one 2xx was the last request.
    expect(await second.stop()).toBe(0);
    expect(answers.filter((status) => status === 200)).toHaveLength(1);
    expect(answers.at(-1)).toBe(200);
    expect(new Set(receiver.received.map((r) => r.body)).size).toBe(1);
  });
});
