import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueKey } from "../../src/auth/keys.js";
import { apiKeys } from "../../src/store/schema.js";
import { createTestApp, createTestAppOn, requestAs, type TestApp } from "../support/app.js";
import { BACKENDS } from "../support/db.js";
import { type FakeCli, fakeCli } from "../support/fake-cli.js";
import { longRun } from "../support/fake-scenarios.js";

// API keys in front of /v1, and tenancy: a key sees its own sessions, runs and events only.

describe.each(BACKENDS)("keys and tenants on %s", (backend) => {
  let t: TestApp;
  let fake: FakeCli;
  let root: string;
  let admin: string;
  let alice: string;
  let bob: string;

  beforeAll(async () => {
    root = realpathSync(mkdtempSync(join(tmpdir(), "agent-bridge-roots-")));
    mkdirSync(join(root, "project"));
    mkdirSync(join(root, "outside"));
    mkdirSync(join(root, "allowed"));
    symlinkSync(join(root, "outside"), join(root, "allowed", "escape"));
    fake = await fakeCli(longRun(30));
    t = await createTestApp(backend, {
      ...fake.bridgeEnv,
      AGENT_BRIDGE_AUTH: "keys",
      AGENT_BRIDGE_WORK_DIR: join(root, "allowed"),
    });
    admin = (await issueKey(t.database.db, { name: "admin", admin: true })).key;
    alice = await createKeyAs(admin, "alice");
    bob = await createKeyAs(admin, "bob");
  });
  afterAll(async () => {
    await t.close();
    await fake.cleanup();
    rmSync(root, { recursive: true, force: true });
  });

  const as = (key: string | undefined, path: string, init: RequestInit = {}) =>
    requestAs(t.app, key, path, init);
  const postJson = (
    key: string,
    path: string,
    body: unknown,
    headers: Record<string, string> = {},
  ) =>
    as(key, path, {
      method: "POST",
      headers: { "Content-Type": "application/json", ...headers },
      body: JSON.stringify(body),
    });
  async function createKeyAs(adminKey: string, name: string): Promise<string> {
    const res = await postJson(adminKey, "/v1/keys", { name });
    expect(res.status).toBe(201);
    return (await res.json()).key;
  }

  describe("without a valid key every /v1 route is a 401 with WWW-Authenticate", () => {
    const cases: [string, () => string | undefined][] = [
      ["no key", () => undefined],
      ["a malformed key", () => "not-a-key"],
      ["an unknown key", () => `ab_${"x".repeat(43)}`],
    ];
    it.each(cases)("%s", async (_name, key) => {
      for (const path of ["/v1/sessions", "/v1/usage", "/v1/keys"]) {
        const res = await as(key(), path);
        expect(res.status).toBe(401);
        expect(res.headers.get("www-authenticate")).toBe('Bearer realm="agent-bridge"');
        expect((await res.json()).code).toBe("unauthorized");
      }
    });

    it("a revoked key", async () => {
      const created = await (await postJson(admin, "/v1/keys", { name: "short-lived" })).json();
      expect((await as(created.key, "/v1/sessions")).status).toBe(200);
      const revoked = await as(admin, `/v1/keys/${created.id}`, { method: "DELETE" });
      expect((await revoked.json()).revoked_at).not.toBeNull();
      expect((await as(created.key, "/v1/sessions")).status).toBe(401);
    });

    it("while health, readiness, docs and the spec stay open", async () => {
      for (const path of ["/healthz", "/docs", "/openapi.json"]) {
        expect((await as(undefined, path)).status, path).toBe(200);
      }
      expect((await as(undefined, "/readyz")).status).not.toBe(401);
    });
  });

  it("keeps no key in plain text: only hashes and short prefixes are stored", async () => {
    const rows = await t.database.db.select().from(apiKeys);
    const stored = JSON.stringify(rows);
    for (const key of [admin, alice, bob]) {
      expect(stored).not.toContain(key);
      expect(stored).not.toContain(key.slice(0, 20));
    }
  });

  it("records when a key was last used", async () => {
    const created = await (await postJson(admin, "/v1/keys", { name: "fresh" })).json();
    expect(created.last_used_at).toBeNull();
    expect((await as(created.key, "/v1/sessions")).status).toBe(200);
    await expect
      .poll(async () => {
        const list = await (await as(admin, "/v1/keys")).json();
        return list.data.find((k: { id: string }) => k.id === created.id)?.last_used_at;
      })
      .not.toBeNull();
  });

  it("manages keys with admin keys only", async () => {
    expect((await as(alice, "/v1/keys")).status).toBe(403);
    expect((await postJson(alice, "/v1/keys", { name: "sneaky", admin: true })).status).toBe(403);
    const list = await (await as(admin, "/v1/keys")).json();
    expect(list.data.map((k: { name: string }) => k.name)).toEqual(
      expect.arrayContaining(["admin", "alice", "bob"]),
    );
    expect(JSON.stringify(list)).not.toContain(alice);
  });

  it("gives another tenant 404 on every route that names a session or run, and never lists it", async () => {
    const session = await (await postJson(alice, "/v1/sessions", { title: "alice's" })).json();
    const run = await (
      await postJson(
        alice,
        `/v1/sessions/${session.id}/messages`,
        { text: "hi" },
        { Prefer: "respond-async" },
      )
    ).json();

    const probes: [string, string, RequestInit?][] = [
      ["GET", `/v1/sessions/${session.id}`],
      ["POST", `/v1/sessions/${session.id}/messages`],
      ["GET", `/v1/runs/${run.id}`],
      ["GET", `/v1/runs/${run.id}/events`],
      ["POST", `/v1/runs/${run.id}/cancel`],
      ["DELETE", `/v1/sessions/${session.id}`],
    ];
    for (const [method, path] of probes) {
      const res =
        method === "POST" && path.endsWith("/messages")
          ? await postJson(bob, path, { text: "let me in" })
          : await as(bob, path, { method });
      expect(res.status, `${method} ${path}`).toBe(404);
    }
    const bobsList = await (await as(bob, "/v1/sessions")).json();
    expect(bobsList.data.map((s: { id: string }) => s.id)).not.toContain(session.id);

    // The owner and an admin still see it.
    expect((await as(alice, `/v1/sessions/${session.id}`)).status).toBe(200);
    expect((await as(admin, `/v1/runs/${run.id}`)).status).toBe(200);
    const adminList = await (await as(admin, "/v1/sessions?limit=100")).json();
    expect(adminList.data.map((s: { id: string }) => s.id)).toContain(session.id);
  });

  it("counts usage per key, and over every key for an admin", async () => {
    const aliceUsage = await (await as(alice, "/v1/usage")).json();
    const bobUsage = await (await as(bob, "/v1/usage")).json();
    const all = await (await as(admin, "/v1/usage")).json();
    expect(bobUsage.sessions).toBe(0);
    expect(aliceUsage.sessions).toBeGreaterThan(0);
    expect(all.sessions).toBeGreaterThanOrEqual(aliceUsage.sessions + bobUsage.sessions);
  });

  describe("a session's work_dir must resolve inside an allowed root", () => {
    it("a directory inside the root is taken, as its real path", async () => {
      mkdirSync(join(root, "allowed", "repo"), { recursive: true });
      const res = await postJson(alice, "/v1/sessions", { work_dir: "repo" });
      expect(res.status).toBe(201);
      expect((await res.json()).work_dir).toBe(join(root, "allowed", "repo"));
    });

    const escapes: [string, () => string][] = [
      ["a ../ escape", () => "../outside"],
      ["an absolute path outside", () => join(root, "project")],
      ["a symlink inside the root that points out", () => "escape"],
      ["a path that does not exist", () => "nope"],
    ];
    it.each(escapes)("%s is a 400 naming the allowed roots", async (_name, workDir) => {
      const res = await postJson(alice, "/v1/sessions", { work_dir: workDir() });
      expect(res.status).toBe(400);
      const body = await res.json();
      expect(body.code).toBe("work_dir_not_allowed");
      expect(body.detail).toContain(join(root, "allowed"));
    });
  });
});

describe("per-key limits", () => {
  it.each(BACKENDS)(
    "more requests a minute than allowed are a 429 with Retry-After, counted across instances on one database (%s)",
    async (backend) => {
      const env = { AGENT_BRIDGE_AUTH: "keys", AGENT_BRIDGE_RATE_LIMIT_PER_MINUTE: "5" };
      const t = await createTestApp(backend, env);
      // A second instance: its own app and process memory, the same database.
      const other = createTestAppOn(t.database, env).app;
      try {
        const { key } = await issueKey(t.database.db, { name: "busy", admin: false });
        const { key: calm } = await issueKey(t.database.db, { name: "calm", admin: false });
        const statuses = [];
        for (let i = 0; i < 6; i++) {
          const app = i % 2 === 0 ? t.app : other;
          statuses.push((await requestAs(app, key, "/v1/sessions")).status);
        }
        expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
        const res = await requestAs(other, key, "/v1/sessions");
        expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
        expect((await res.json()).code).toBe("rate_limited");
        // Another key has its own allowance.
        expect((await requestAs(other, calm, "/v1/sessions")).status).toBe(200);
      } finally {
        await t.close();
      }
    },
  );

  it("a key past its limit of active runs gets 429 for the next one", async () => {
    const fake = await fakeCli(longRun(30));
    const t = await createTestApp("pglite", {
      ...fake.bridgeEnv,
      AGENT_BRIDGE_AUTH: "keys",
      AGENT_BRIDGE_MAX_RUNS_PER_KEY: "1",
    });
    try {
      const { key } = await issueKey(t.database.db, { name: "one-at-a-time", admin: false });
      const headers = {
        Authorization: `Bearer ${key}`,
        "Content-Type": "application/json",
        Prefer: "respond-async",
      };
      const post = async () => {
        const session = await (
          await t.app.request("/v1/sessions", { method: "POST", headers, body: "{}" })
        ).json();
        return t.app.request(`/v1/sessions/${session.id}/messages`, {
          method: "POST",
          headers,
          body: JSON.stringify({ text: "work" }),
        });
      };
      expect((await post()).status).toBe(202);
      const second = await post();
      expect(second.status).toBe(429);
      expect((await second.json()).code).toBe("rate_limited");
      expect(second.headers.get("retry-after")).not.toBeNull();
    } finally {
      await t.close();
      await fake.cleanup();
    }
  });

  it("refuses AGENT_BRIDGE_AUTH=none unless bound to a loopback address", async () => {
    const { loadConfig, ConfigError } = await import("../../src/config.js");
    expect(() => loadConfig({ AGENT_BRIDGE_AUTH: "none", HOST: "0.0.0.0" })).toThrow(ConfigError);
    expect(loadConfig({ AGENT_BRIDGE_AUTH: "none", HOST: "127.0.0.1" }).auth.mode).toBe("none");
  });
});

describe.each(BACKENDS)("a second tenant where runs cannot be sandboxed, on %s", (backend) => {
  let t: TestApp;
  let admin: string;

  beforeAll(async () => {
    // A PATH without bubblewrap on it; AGENT_BRIDGE_SANDBOX is `auto`, the default.
    t = await createTestApp(backend, { AGENT_BRIDGE_AUTH: "keys", PATH: "/nonexistent" });
    admin = (await issueKey(t.database.db, { name: "admin", admin: true })).key;
  });
  afterAll(() => t.close());

  it("is refused a key (409 sandbox_required, saying what to install), and nothing is made", async () => {
    const res = await requestAs(t.app, admin, "/v1/keys", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ name: "tenant b" }),
    });
    expect(res.status).toBe(409);
    expect(res.headers.get("content-type")).toBe("application/problem+json");
    expect(await res.json()).toMatchObject({
      code: "sandbox_required",
      detail:
        "2 API keys could run agents here, but runs cannot be sandboxed: bubblewrap (bwrap) is not installed; install them (Debian: apt-get install bubblewrap socat), or set AGENT_BRIDGE_SANDBOX=off to run the agents of several tenants without one",
    });
    expect(await t.database.db.$count(apiKeys)).toBe(1);
  });

  it("runs no message once a second key came another way (the command line, another instance): 409 sandbox_required", async () => {
    const session = await (
      await requestAs(t.app, admin, "/v1/sessions", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: "{}",
      })
    ).json();
    await issueKey(t.database.db, { name: "made elsewhere", admin: false });
    const res = await requestAs(t.app, admin, `/v1/sessions/${session.id}/messages`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify({ text: "hello" }),
    });
    expect(res.status).toBe(409);
    expect(await res.json()).toMatchObject({
      code: "sandbox_required",
      detail: expect.stringContaining("2 API keys could run agents here"),
    });
  });
});
