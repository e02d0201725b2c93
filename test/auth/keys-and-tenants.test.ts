import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueKey } from "../../src/auth/keys.js";
import type { Run } from "../../src/client/index.js";
import { revokeKey } from "../../src/store/keys.js";
import { apiKeys, rateBuckets } from "../../src/store/schema.js";
import { createTestApp, createTestAppOn, type TestApp } from "../support/app.js";
import { appClient } from "../support/app-client.js";
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

  const as = (key?: string) => appClient(t.app, key);
  // `admin` defaults to false, but the generated types (openapi-typescript) require a field
  // with a default: the tests spell it.
  const createKey = (key: string, name: string, admin = false) =>
    as(key).POST("/v1/keys", { body: { name, admin } });
  async function createKeyAs(adminKey: string, name: string): Promise<string> {
    const { data, response } = await createKey(adminKey, name);
    expect(response.status).toBe(201);
    return data?.key ?? "";
  }
  const sessionsStatus = async (key?: string) =>
    (await as(key).GET("/v1/sessions")).response.status;

  describe("without a valid key every /v1 route is a 401 with WWW-Authenticate", () => {
    const cases: [string, () => string | undefined][] = [
      ["no key", () => undefined],
      ["a malformed key", () => "not-a-key"],
      ["an unknown key", () => `ab_${"x".repeat(43)}`],
    ];
    it.each(cases)("%s", async (_name, key) => {
      const api = as(key());
      for (const { error, response } of [
        await api.GET("/v1/sessions"),
        await api.GET("/v1/usage"),
        await api.GET("/v1/keys"),
      ]) {
        expect(response.status, response.url).toBe(401);
        expect(response.headers.get("www-authenticate")).toBe('Bearer realm="agent-bridge"');
        expect(error?.code).toBe("unauthorized");
      }
    });

    it("a revoked key", async () => {
      const { data: created } = await createKey(admin, "short-lived");
      const id = created?.id ?? "";
      expect(await sessionsStatus(created?.key)).toBe(200);
      const revoked = await as(admin).DELETE("/v1/keys/{id}", { params: { path: { id } } });
      expect(revoked.data?.revoked_at).not.toBeNull();
      expect(await sessionsStatus(created?.key)).toBe(401);
    });

    it("while health, readiness, docs and the spec stay open", async () => {
      expect((await as().GET("/healthz")).response.status).toBe(200);
      // Not in the API's contract: the pages about it.
      for (const path of ["/docs", "/openapi.json"]) {
        expect((await t.app.request(path)).status, path).toBe(200);
      }
      expect((await as().GET("/readyz")).response.status).not.toBe(401);
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
    const { data: created } = await createKey(admin, "fresh");
    expect(created?.last_used_at).toBeNull();
    expect(await sessionsStatus(created?.key)).toBe(200);
    await expect
      .poll(async () => {
        const { data: list } = await as(admin).GET("/v1/keys");
        return list?.data.find((k) => k.id === created?.id)?.last_used_at;
      })
      .not.toBeNull();
  });

  it("manages keys with admin keys only", async () => {
    expect((await as(alice).GET("/v1/keys")).response.status).toBe(403);
    expect((await createKey(alice, "sneaky", true)).response.status).toBe(403);
    const { data: list } = await as(admin).GET("/v1/keys");
    expect(list?.data.map((k) => k.name)).toEqual(
      expect.arrayContaining(["admin", "alice", "bob"]),
    );
    expect(JSON.stringify(list)).not.toContain(alice);
  });

  it("gives another tenant 404 on every route that names a session or run, and never lists it", async () => {
    const session = await as(alice).createSession({ title: "alice's" });
    const run: Run = await as(alice).sendAsync(session.id, "hi");

    const bobs = as(bob);
    const ofSession = { params: { path: { id: session.id } } };
    const ofRun = { params: { path: { id: run.id } } };
    const probes: [string, () => Promise<{ response: Response }>][] = [
      ["GET /v1/sessions/{id}", () => bobs.GET("/v1/sessions/{id}", ofSession)],
      [
        "POST /v1/sessions/{id}/messages",
        () =>
          bobs.POST("/v1/sessions/{id}/messages", { ...ofSession, body: { text: "let me in" } }),
      ],
      ["GET /v1/runs/{id}", () => bobs.GET("/v1/runs/{id}", ofRun)],
      [
        "GET /v1/runs/{id}/events",
        () => bobs.GET("/v1/runs/{id}/events", { ...ofRun, parseAs: "stream" }),
      ],
      ["POST /v1/runs/{id}/cancel", () => bobs.POST("/v1/runs/{id}/cancel", ofRun)],
      ["DELETE /v1/sessions/{id}", () => bobs.DELETE("/v1/sessions/{id}", ofSession)],
    ];
    for (const [probe, send] of probes) {
      expect((await send()).response.status, probe).toBe(404);
    }
    const bobsList = await bobs.listSessions();
    expect(bobsList.data.map((s) => s.id)).not.toContain(session.id);

    // The owner and an admin still see it.
    expect((await as(alice).GET("/v1/sessions/{id}", ofSession)).response.status).toBe(200);
    expect((await as(admin).GET("/v1/runs/{id}", ofRun)).response.status).toBe(200);
    const adminList = await as(admin).listSessions({ limit: 100 });
    expect(adminList.data.map((s) => s.id)).toContain(session.id);
  });

  it("counts usage per key, and over every key for an admin", async () => {
    const usage = async (key: string) => (await as(key).GET("/v1/usage")).data?.sessions ?? NaN;
    const [aliceSessions, bobSessions, all] = [
      await usage(alice),
      await usage(bob),
      await usage(admin),
    ];
    expect(bobSessions).toBe(0);
    expect(aliceSessions).toBeGreaterThan(0);
    expect(all).toBeGreaterThanOrEqual(aliceSessions + bobSessions);
  });

  describe("a session's work_dir must resolve inside an allowed root", () => {
    it("a directory inside the root is taken, as its real path", async () => {
      mkdirSync(join(root, "allowed", "repo"), { recursive: true });
      const { data, response } = await as(alice).POST("/v1/sessions", {
        body: { work_dir: "repo" },
      });
      expect(response.status).toBe(201);
      expect(data?.work_dir).toBe(join(root, "allowed", "repo"));
    });

    const escapes: [string, () => string][] = [
      ["a ../ escape", () => "../outside"],
      ["an absolute path outside", () => join(root, "project")],
      ["a symlink inside the root that points out", () => "escape"],
      ["a path that does not exist", () => "nope"],
    ];
    it.each(escapes)("%s is a 400 naming the allowed roots", async (_name, workDir) => {
      const { error, response } = await as(alice).POST("/v1/sessions", {
        body: { work_dir: workDir() },
      });
      expect(response.status).toBe(400);
      expect(error?.code).toBe("work_dir_not_allowed");
      expect(error?.detail).toContain(join(root, "allowed"));
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
          statuses.push((await appClient(app, key).GET("/v1/sessions")).response.status);
        }
        expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
        const { error, response } = await appClient(other, key).GET("/v1/sessions");
        expect(Number(response.headers.get("retry-after"))).toBeGreaterThan(0);
        expect(error?.code).toBe("rate_limited");
        // Another key has its own allowance.
        expect((await appClient(other, calm).GET("/v1/sessions")).response.status).toBe(200);
      } finally {
        await t.close();
      }
    },
  );

  it.each(BACKENDS)(
    "a request with an unknown or revoked key is refused and draws on no bucket (%s)",
    async (backend) => {
      const t = await createTestApp(backend, {
        AGENT_BRIDGE_AUTH: "keys",
        AGENT_BRIDGE_RATE_LIMIT_PER_MINUTE: "5",
      });
      try {
        const buckets = () => t.database.db.select().from(rateBuckets);
        const { key, row } = await issueKey(t.database.db, { name: "gone", admin: false });
        expect((await appClient(t.app, key).GET("/v1/sessions")).response.status).toBe(200);
        const [drawn] = await buckets();
        expect(drawn).toMatchObject({ bucket: row.id, tokens: 4 });
        await revokeKey(t.database.db, row.id);
        for (const refused of [key, `ab_${"x".repeat(43)}`]) {
          const { response, error } = await appClient(t.app, refused).GET("/v1/sessions");
          expect(response.status).toBe(401);
          expect(error?.code).toBe("unauthorized");
        }
        expect(await buckets()).toEqual([drawn]);
      } finally {
        await t.close();
      }
    },
  );

  it.each(BACKENDS)(
    "a request whose count cannot be written goes through uncounted (%s)",
    async (backend) => {
      const t = await createTestApp(backend, { AGENT_BRIDGE_AUTH: "keys" });
      try {
        const { key } = await issueKey(t.database.db, { name: "counted", admin: false });
        // A database that reads but refuses the buckets' writes.
        await t.database.db.execute(sql`create function refuse() returns trigger language plpgsql
          as $$ begin raise exception 'read-only'; end $$`);
        await t.database.db.execute(sql`create trigger refuse before insert or update
          on rate_buckets for each row execute function refuse()`);
        const { response, data } = await appClient(t.app, key).GET("/v1/sessions");
        expect(response.status).toBe(200);
        expect(data?.data).toEqual([]);
        expect(await t.database.db.select().from(rateBuckets)).toEqual([]);
        await t.database.db.execute(sql`drop function refuse() cascade`);
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
      const api = appClient(t.app, key);
      const post = async () =>
        api.POST("/v1/sessions/{id}/messages", {
          params: {
            path: { id: (await api.createSession()).id },
            header: { prefer: "respond-async" },
          },
          body: { text: "work" },
        });
      expect((await post()).response.status).toBe(202);
      const second = await post();
      expect(second.response.status).toBe(429);
      expect(second.error?.code).toBe("rate_limited");
      expect(second.response.headers.get("retry-after")).not.toBeNull();
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
    const { error, response } = await appClient(t.app, admin).POST("/v1/keys", {
      body: { name: "tenant b", admin: false },
    });
    expect(response.status).toBe(409);
    expect(response.headers.get("content-type")).toBe("application/problem+json");
    expect(error).toMatchObject({
      code: "sandbox_required",
      detail:
        "2 API keys could run agents here, but runs cannot be sandboxed: bubblewrap (bwrap) is not installed; install them (Debian: apt-get install bubblewrap socat), or set AGENT_BRIDGE_SANDBOX=off to run the agents of several tenants without one",
    });
    expect(await t.database.db.$count(apiKeys)).toBe(1);
  });

  it("runs no message once a second key came another way (the command line, another instance): 409 sandbox_required", async () => {
    const api = appClient(t.app, admin);
    const session = await api.createSession();
    await issueKey(t.database.db, { name: "made elsewhere", admin: false });
    const { error, response } = await api.POST("/v1/sessions/{id}/messages", {
      params: { path: { id: session.id } },
      body: { text: "hello" },
      headers: { Accept: "application/json" },
    });
    expect(response.status).toBe(409);
    expect(error).toMatchObject({
      code: "sandbox_required",
      detail: expect.stringContaining("2 API keys could run agents here"),
    });
  });
});
