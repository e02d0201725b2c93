import { isIP } from "node:net";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildHookWorkers } from "../../src/app.js";
import { postCallback } from "../../src/hooks/callback-post.js";
import type { CallbackOutbox } from "../../src/hooks/outbox.js";
import { CallbackTargets, type Resolve } from "../../src/net/targets.js";
import { hooks } from "../../src/store/schema.js";
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

// Callbacks go to global unicast addresses only: any other (loopback, private, link-local,
// reserved…, or an IPv6 address carrying such an IPv4 one) is refused when the hook is registered
// and again when a name resolves to it at an attempt, unless AGENT_BRIDGE_CALLBACK_ALLOW lists it;
// and what the receiver's failure was is told without the socket's own words.

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
  ["broadcast", "http://255.255.255.255/"],
  ["reserved", "http://240.0.0.1/"],
  ["reserved", "http://192.0.2.1/"], // TEST-NET-1
  ["reserved", "http://[2001:db8::1]/"], // documentation
  ["outside 2000::/3", "http://[4000::1]/"],
  ["loopback via IPv4-translated", "http://[::ffff:0:127.0.0.1]/"],
  // Teredo to the server 8.8.8.8 and the client 127.0.0.1 (its bits inverted: 80ff:fffe).
  ["loopback via Teredo", "http://[2001:0:808:808::80ff:fffe]/"],
  ["private via 6to4", "http://[2002:a00:1::1]/"],
  ["link-local via NAT64", "http://[64:ff9b::a9fe:a9fe]/"],
  // Local-use NAT64 puts the IPv4 address where its network chose: it cannot be checked.
  ["NAT64", "http://[64:ff9b:1::808:808]/"],
];

/** Hosts of the finding that passed both checks, and why each is now refused. */
const FINDING: [string, string][] = [
  ["loopback via NAT64", "[64:ff9b::7f00:1]"], // NAT64 of 127.0.0.1
  ["loopback via 6to4", "[2002:7f00:1::1]"],
  ["loopback via IPv4-compatible", "[::127.0.0.1]"],
  ["site-local", "[fec0::1]"],
  ["reserved", "198.18.0.1"], // benchmarking
  ["reserved", "192.0.0.170"], // IETF protocol assignments (NAT64 discovery)
];

/** A resolver answering every name with `addresses`, as a DNS server the hook's owner runs may. */
const answering =
  (...addresses: string[]): Resolve =>
  (_hostname, _options, callback) =>
    callback(
      null,
      addresses.map((address) => ({ address, family: isIP(address) })),
    );

/** One attempt at `url` through `targets`, as the outbox makes it. */
const attempt = (url: string, targets: CallbackTargets) =>
  postCallback(url, { "Content-Type": "application/json" }, "{}", {
    targets,
    timeoutMs: 5_000,
    stopping: new AbortController().signal,
  });

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
        message: expect.stringContaining(`is not a global unicast address (${why})`),
      },
    ]);
    expect((await t.app.request(`/v1/hooks/${name}`)).status).toBe(404);
  });

  it.each(FINDING)(
    "refuses at registration the finding's address that is not global unicast (%s): %s",
    async (why, host) => {
      const name = `finding-${crypto.randomUUID()}`;
      const res = await register(t.app, name, `http://${host}/hook`);
      expect(res.status).toBe(400);
      expect((await res.json()).errors).toEqual([
        {
          location: "body",
          path: "callback_url",
          message: expect.stringContaining(`is not a global unicast address (${why})`),
        },
      ]);
      expect((await t.app.request(`/v1/hooks/${name}`)).status).toBe(404);
    },
  );

  it.each([
    "http://localhost:9/results",
    "http://LOCALHOST./results",
    "https://ci.localhost/results",
  ])("refuses a localhost name at registration: %s", async (url) => {
    const name = `localhost-${crypto.randomUUID()}`;
    const res = await register(t.app, name, url);
    expect(res.status).toBe(400);
    expect((await res.json()).errors).toEqual([
      {
        location: "body",
        path: "callback_url",
        message: expect.stringContaining("names loopback"),
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

  it.each([
    "https://ci.example.com/results",
    "http://8.8.8.8/",
    "http://[2606:4700:4700::1111]/",
    "http://[::ffff:8.8.8.8]/",
    "http://[64:ff9b::808:808]/", // NAT64 of 8.8.8.8
    "http://[2002:808:808::1]/", // 6to4 of 8.8.8.8
  ])("takes a name or a global unicast address: %s", async (url) => {
    expect((await register(t.app, `outside-${crypto.randomUUID()}`, url)).status).toBe(201);
  });

  it("takes an inside address that AGENT_BRIDGE_CALLBACK_ALLOW lists, and localhost when loopback is listed", async () => {
    const allowing = await createTestApp(backend, {
      AGENT_BRIDGE_CALLBACK_ALLOW: "10.0.0.0/8, fd00::/8, 198.18.0.0/15",
    });
    try {
      expect((await register(allowing.app, "in-10", "http://10.1.2.3/")).status).toBe(201);
      expect((await register(allowing.app, "in-fd", "http://[fd00::5]/")).status).toBe(201);
      expect((await register(allowing.app, "in-198", "http://198.18.0.1/")).status).toBe(201);
      // An IPv6 address carrying a listed IPv4 one is judged as that one.
      expect((await register(allowing.app, "in-nat64", "http://[64:ff9b::a01:203]/")).status).toBe(
        201,
      );
      expect((await register(allowing.app, "in-192", "http://192.168.0.1/")).status).toBe(400);
      expect((await register(allowing.app, "in-lo", "http://localhost/")).status).toBe(400);
    } finally {
      await allowing.close();
    }
    // The tests' own configuration lists 127.0.0.1 and ::1, where their receivers listen.
    const loopback = await createTestApp(backend);
    try {
      expect((await register(loopback.app, "lo", "http://localhost:9/")).status).toBe(201);
    } finally {
      await loopback.close();
    }
  });

  /** Stores a hook calling back to `url`, delivers to it, and waits for the callback to fail. */
  async function failedCallback(name: string, url: string) {
    expect((await register(t.app, name, "https://ci.example.com/results")).status).toBe(201);
    await t.database.db.update(hooks).set({ callbackUrl: url }).where(eq(hooks.name, name));
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
    // A hook stored before localhost names were refused at registration: the attempt resolves it.
    const name = `by-name-${crypto.randomUUID()}`;
    const url = receiver.url.replace("127.0.0.1", "localhost");
    const callback = await failedCallback(name, url);
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

describe("the address of an attempt", () => {
  it.each(FINDING)(
    "is refused when the URL writes the finding's address (%s): %s",
    async (why, host) => {
      const outcome = await attempt(`http://${host}:9/`, new CallbackTargets([]));
      expect(outcome).toEqual({ ok: false, status: null, error: `blocked_address (${why})` });
    },
  );

  it.each(FINDING)(
    "is refused when a name resolves to the finding's address (%s): %s",
    async (why, host) => {
      const address = host.replace(/^\[(.*)\]$/, "$1");
      const targets = new CallbackTargets([], answering(address));
      const outcome = await attempt("http://rebound.test:9/", targets);
      expect(outcome).toMatchObject({ ok: false, status: null, error: `blocked_address (${why})` });
    },
  );

  it("is refused when any address a name resolves to is inside", async () => {
    const targets = new CallbackTargets([], answering("8.8.8.8", "64:ff9b::7f00:1"));
    const outcome = await attempt("http://rebound.test:9/", targets);
    expect(outcome).toMatchObject({ error: "blocked_address (loopback via NAT64)" });
  });

  it("is the address the name resolved to, once checked", async () => {
    const receiver = await startReceiver();
    try {
      const targets = new CallbackTargets(
        [{ address: "127.0.0.1", prefix: 32, family: "ipv4" }],
        answering("127.0.0.1"),
      );
      const url = receiver.url.replace("127.0.0.1", "rebound.test");
      expect(await attempt(url, targets)).toEqual({ ok: true, status: 200 });
      expect(receiver.received).toHaveLength(1);
    } finally {
      await receiver.close();
    }
  });

  it("is refused for localhost, resolved by the system, and nothing is sent", async () => {
    const receiver = await startReceiver();
    try {
      const url = receiver.url.replace("127.0.0.1", "localhost");
      const outcome = await attempt(url, new CallbackTargets([]));
      expect(outcome).toMatchObject({ ok: false, error: "blocked_address (loopback)" });
      expect(receiver.received).toEqual([]);
    } finally {
      await receiver.close();
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
