import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildHookWorkers } from "../../src/app.js";
import { postCallback } from "../../src/hooks/callback-post.js";
import { CallbackTargets } from "../../src/hooks/callback-targets.js";
import type { CallbackOutbox } from "../../src/hooks/outbox.js";
import { createTestApp, listen, type TestApp } from "../support/app.js";
import { BACKENDS } from "../support/db.js";
import { type FakeCli, fakeCli } from "../support/fake-cli.js";
import { streamedReply } from "../support/fake-scenarios.js";
import {
  deliver,
  getRun,
  newStandardSecret,
  type Receiver,
  startReceiver,
  until,
} from "./support.js";

// Callbacks cannot be pointed inside: an address inside (loopback, private, link-local…) is
// refused when the hook is registered and again when a name resolves to it at an attempt, unless
// AGENT_BRIDGE_CALLBACK_ALLOW lists it; and what the receiver's failure was is told without the
// socket's own words.

const SECRET = "bearer-secret-0123456789";
const headers = { "Content-Type": "application/json", Authorization: `Bearer ${SECRET}` };

const INSIDE: [string, string][] = [
  ["loopback", "http://127.0.0.1:5432/"],
  ["loopback", "http://127.1.2.3/"],
  ["loopback", "http://[::1]/"],
  ["loopback", "http://2130706433/"], // 127.0.0.1 written as a number
  ["loopback", "http://[::ffff:127.0.0.1]/"], // IPv4-mapped
  ["private", "http://10.0.0.1/"],
  ["private", "http://172.16.5.4/"],
  ["private", "http://192.168.1.1/"],
  ["private", "http://[fc00::1]/"],
  ["private", "http://[fd00:ec2::254]/"], // the cloud metadata address over IPv6
  ["private", "http://[::ffff:10.1.2.3]/"],
  ["shared (CGNAT)", "http://100.64.0.1/"],
  ["link-local", "http://169.254.169.254/latest/meta-data/"], // the cloud metadata address
  ["link-local", "http://[fe80::1]/"],
  ["unspecified", "http://0.0.0.0/"],
  ["unspecified", "http://[::]/"],
  ["multicast", "http://224.0.0.1/"],
  ["multicast", "http://[ff02::1]/"],
  ["broadcast or reserved", "http://255.255.255.255/"],
];

describe.each(BACKENDS)("callback targets on %s", (backend) => {
  let fake: FakeCli;
  let t: TestApp;
  let outbox: CallbackOutbox;
  const receivers: Receiver[] = [];

  beforeAll(async () => {
    fake = await fakeCli(streamedReply(["Done."]));
    // Nothing allowed: an empty variable is the default.
    t = await createTestApp(backend, {
      ...fake.bridgeEnv,
      AGENT_BRIDGE_CALLBACK_ALLOW: "",
      AGENT_BRIDGE_CALLBACK_MAX_ATTEMPTS: "1",
      AGENT_BRIDGE_CALLBACK_POLL_MS: "100",
    });
    ({ outbox } = buildHookWorkers(t.deps));
    outbox.start();
  });
  afterAll(async () => {
    await outbox.stop();
    await t.close();
    await fake.cleanup();
    for (const r of receivers) await r.close();
  });

  const register = (app: TestApp["app"], name: string, callbackUrl: string) =>
    app.request("/v1/hooks", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({
        name,
        verification: "bearer",
        secret: SECRET,
        prompt_template: "go",
        callback_url: callbackUrl,
        callback_secret: newStandardSecret(),
      }),
    });

  it.each(INSIDE)("refuses an address inside at registration (%s): %s", async (why, url) => {
    const name = `inside-${crypto.randomUUID()}`;
    const res = await register(t.app, name, url);
    expect(res.status).toBe(400);
    expect(res.headers.get("content-type")).toBe("application/problem+json");
    const problem = await res.json();
    expect(problem.code).toBe("validation_failed");
    expect(problem.errors).toEqual([
      {
        location: "body",
        path: "callback_url",
        message: expect.stringContaining(`is an address inside (${why})`),
      },
    ]);
    expect((await t.app.request(`/v1/hooks/${name}`)).status).toBe(404);
  });

  it("refuses user:pass@ in a callback_url", async () => {
    const res = await register(t.app, "creds", "https://ci:hunter2@ci.example.com/results");
    expect(res.status).toBe(400);
    expect((await res.json()).errors[0]).toMatchObject({
      path: "callback_url",
      message: expect.stringContaining("user:pass@"),
    });
  });

  it("takes an outside address, and an inside one that AGENT_BRIDGE_CALLBACK_ALLOW lists", async () => {
    expect((await register(t.app, "outside", "https://ci.example.com/results")).status).toBe(201);
    const allowing = await createTestApp(backend, {
      AGENT_BRIDGE_CALLBACK_ALLOW: "10.0.0.0/8, fd00::/8",
    });
    try {
      expect((await register(allowing.app, "in-10", "http://10.1.2.3/")).status).toBe(201);
      expect((await register(allowing.app, "in-fd", "http://[fd00::5]/")).status).toBe(201);
      expect((await register(allowing.app, "in-192", "http://192.168.0.1/")).status).toBe(400);
    } finally {
      await allowing.close();
    }
  });

  /** Registers a hook calling back to `url`, delivers to it, and waits for the callback to fail. */
  async function failedCallback(name: string, url: string) {
    expect((await register(t.app, name, url)).status).toBe(201);
    const server = await listen(t.app);
    try {
      const res = await deliver(server.url, name, "{}", headers);
      expect(res.status).toBe(202);
      const runId = (await res.json()).run_id;
      const run = await until(async () => {
        const r = await getRun(server.url, runId);
        return r.callback?.state === "failed" && r;
      });
      return run.callback;
    } finally {
      await server.close();
    }
  }

  it("refuses at the attempt a name that resolves to loopback, and sends nothing", async () => {
    const receiver = await startReceiver();
    receivers.push(receiver);
    // The name passes registration (it is not resolved then); the attempt resolves it.
    const url = receiver.url.replace("127.0.0.1", "localhost");
    const callback = await failedCallback(`by-name-${crypto.randomUUID()}`, url);
    expect(callback).toMatchObject({ attempts: 1, last_status: null });
    expect(callback?.last_error).toBe("blocked_address (loopback)");
    expect(receiver.received).toHaveLength(0);
  });
});

describe.each(BACKENDS)("callback failures on %s", (backend) => {
  it("records an unreachable receiver as `unreachable`, without its address or the socket's error", async () => {
    const fake = await fakeCli(streamedReply(["Done."]));
    const t = await createTestApp(backend, {
      ...fake.bridgeEnv,
      AGENT_BRIDGE_CALLBACK_MAX_ATTEMPTS: "1",
      AGENT_BRIDGE_CALLBACK_POLL_MS: "100",
    });
    const { outbox } = buildHookWorkers(t.deps);
    outbox.start();
    const server = await listen(t.app);
    try {
      // A port nothing listens on any more (loopback is allowed in the tests' config).
      const gone = await startReceiver();
      await gone.close();
      const res = await t.app.request("/v1/hooks", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({
          name: "gone",
          verification: "bearer",
          secret: SECRET,
          prompt_template: "go",
          callback_url: gone.url,
          callback_secret: newStandardSecret(),
        }),
      });
      expect(res.status).toBe(201);
      const delivered = await deliver(server.url, "gone", "{}", headers);
      const runId = (await delivered.json()).run_id;
      const run = await until(async () => {
        const r = await getRun(server.url, runId);
        return r.callback?.state === "failed" && r;
      });
      expect(run.callback?.last_error).toBe("unreachable");
      expect(JSON.stringify(run)).not.toMatch(/ECONNREFUSED|connect /);
    } finally {
      await server.close();
      await outbox.stop();
      await t.close();
      await fake.cleanup();
    }
  });
});

describe("a callback_url holding credentials, stored before they were refused", () => {
  it("is not sent to: the attempt fails as credentials_in_url", async () => {
    const receiver = await startReceiver();
    try {
      const url = new URL(receiver.url);
      url.username = "user";
      url.password = "pass";
      const outcome = await postCallback(url.toString(), {}, "{}", {
        targets: new CallbackTargets([{ address: "127.0.0.1", prefix: 32, family: "ipv4" }]),
        timeoutMs: 5_000,
        stopping: new AbortController().signal,
      });
      expect(outcome).toEqual({ ok: false, status: null, error: "credentials_in_url" });
      expect(receiver.received).toEqual([]);
    } finally {
      await receiver.close();
    }
  });
});
