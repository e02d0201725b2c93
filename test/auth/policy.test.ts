import { mkdirSync, mkdtempSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueKey } from "../../src/auth/keys.js";
import type { components, Run } from "../../src/client/index.js";
import { createTestApp, type TestApp } from "../support/app.js";
import { appClient } from "../support/app-client.js";
import { BACKENDS } from "../support/db.js";
import { type FakeCli, fakeCli } from "../support/fake-cli.js";
import { longRun } from "../support/fake-scenarios.js";
import { SseReader } from "../support/sse.js";

// Per-key policy: what a key's sessions and hooks may ask for, set by an admin, refused with a
// 403 `policy_denied` that names the field and what is allowed, with nothing created or started.

const HOOK_SECRET = "bearer-secret-0123456789";

describe.each(BACKENDS)("key policies on %s", (backend) => {
  let t: TestApp;
  let fake: FakeCli;
  let root: string;
  let admin: string;

  beforeAll(async () => {
    root = realpathSync(mkdtempSync(join(tmpdir(), "agent-bridge-policy-")));
    for (const dir of ["a", "b", "outside"]) mkdirSync(join(root, dir));
    fake = await fakeCli(longRun(30));
    t = await createTestApp(backend, {
      ...fake.bridgeEnv,
      AGENT_BRIDGE_AUTH: "keys",
      AGENT_BRIDGE_ALLOWED_ROOTS: `${join(root, "a")},${join(root, "b")}`,
      AGENT_BRIDGE_WORK_DIR: join(root, "a"),
    });
    admin = (await issueKey(t.database.db, { name: "admin", admin: true })).key;
  });
  afterAll(async () => {
    await t.close();
    await fake.cleanup();
    rmSync(root, { recursive: true, force: true });
  });

  const as = (key: string) => appClient(t.app, key);
  type KeyPolicy = Omit<components["schemas"]["CreateApiKey"], "name" | "admin">;
  /** A key made by the admin over the API, with its record. */
  async function newKey(body: KeyPolicy & { admin?: boolean } = {}, asKey = admin) {
    const { data, response } = await as(asKey).POST("/v1/keys", {
      body: { name: `k-${crypto.randomUUID()}`, admin: false, ...body },
    });
    expect(response.status).toBe(201);
    return data as NonNullable<typeof data>;
  }
  const patchKey = (id: string, body: components["schemas"]["UpdateApiKey"]) =>
    as(admin).PATCH("/v1/keys/{id}", { params: { path: { id } }, body });
  const newSession = (key: string, body: components["schemas"]["CreateSession"]) =>
    as(key).POST("/v1/sessions", { body });
  const message = (key: string, sessionId: string, body: components["schemas"]["PostMessage"]) =>
    as(key).POST("/v1/sessions/{id}/messages", { params: { path: { id: sessionId } }, body });
  const keys = async () => (await as(admin).GET("/v1/keys")).data?.data ?? [];
  const sessionCount = async (key: string) => (await as(key).listSessions()).data.length;

  it("a non-admin key asking for bypassPermissions gets 403 policy_denied naming the field, and no session", async () => {
    const { key } = await newKey();
    for (const mode of ["bypassPermissions", "dangerously-skip-permissions"] as const) {
      const { error, response } = await newSession(key, { permission_mode: mode });
      expect(response.status).toBe(403);
      expect(response.headers.get("content-type")).toBe("application/problem+json");
      expect(error?.code).toBe("policy_denied");
      expect(error?.detail).toContain("permission_modes");
      expect(error?.detail).toContain(`${mode} is not among`);
      expect(error?.detail).toContain("default, acceptEdits, auto, plan, dontAsk");
    }
    expect(await sessionCount(key)).toBe(0);
    expect((await newSession(key, { permission_mode: "plan" })).response.status).toBe(201);
  });

  it("a key an admin granted bypassPermissions may use it; admin keys may by default", async () => {
    const { key, id } = await newKey();
    const granted = await patchKey(id, { permission_modes: ["bypassPermissions", "default"] });
    expect(granted.response.status).toBe(200);
    expect(granted.data?.permission_modes).toEqual(["default", "bypassPermissions"]);
    const { data, response } = await newSession(key, { permission_mode: "bypassPermissions" });
    expect(response.status).toBe(201);
    expect(data?.permission_mode).toBe("bypassPermissions");
    // Now only those two: acceptEdits is no longer among them.
    expect((await newSession(key, {})).response.status).toBe(403);
    const asAdmin = await newSession(admin, { permission_mode: "dangerously-skip-permissions" });
    expect(asAdmin.response.status).toBe(201);
  });

  it("the key listing shows each key's policy with its defaults filled in, and null restores a default", async () => {
    const { id } = await newKey({
      permission_modes: ["plan"],
      work_roots: [join(root, "b")],
      max_budget_usd: 12.5,
      worktrees: false,
      models: [" claude-opus-5-5", "claude-opus-5-5"],
    });
    const listed = async () => (await keys()).find((k) => k.id === id);
    expect(await listed()).toMatchObject({
      permission_modes: ["plan"],
      work_roots: [join(root, "b")],
      max_budget_usd: 12.5,
      worktrees: false,
      models: ["claude-opus-5-5"],
    });
    const reset = await patchKey(id, {
      permission_modes: null,
      work_roots: null,
      max_budget_usd: null,
      models: null,
    });
    expect(reset.response.status).toBe(200);
    expect(await listed()).toMatchObject({
      permission_modes: ["default", "acceptEdits", "auto", "plan", "dontAsk"],
      work_roots: [join(root, "a"), join(root, "b")],
      max_budget_usd: null,
      models: null,
      // Left out of the PATCH: unchanged.
      worktrees: false,
    });
  });

  it("work roots must lie inside the server's allowed roots (400, nothing stored), and only admins set policies", async () => {
    const before = (await keys()).length;
    const { error, response } = await as(admin).POST("/v1/keys", {
      body: {
        name: "escaping",
        admin: false,
        work_roots: [join(root, "b"), join(root, "outside")],
      },
    });
    expect(response.status).toBe(400);
    expect(error?.code).toBe("validation_failed");
    expect(error?.errors).toEqual([
      expect.objectContaining({ location: "body", path: "work_roots.1" }),
    ]);
    expect(error?.detail).toContain("outside the allowed roots");
    expect(await keys()).toHaveLength(before);
    const { key, id } = await newKey();
    const bad = await patchKey(id, { work_roots: ["/"] });
    expect(bad.response.status).toBe(400);
    const selfGrant = await as(key).PATCH("/v1/keys/{id}", {
      params: { path: { id } },
      body: { permission_modes: ["bypassPermissions"] },
    });
    expect(selfGrant.response.status).toBe(403);
    expect(selfGrant.error?.code).toBe("forbidden");
    const missing = await patchKey(crypto.randomUUID(), { worktrees: true });
    expect(missing.response.status).toBe(404);
    expect(missing.error?.code).toBe("key_not_found");
  });

  it("a session's work dir (given or the server's) must lie in the key's work roots", async () => {
    const { key } = await newKey({ work_roots: [join(root, "b")] });
    const outside = await newSession(key, { work_dir: join(root, "a") });
    expect(outside.response.status).toBe(403);
    expect(outside.error?.code).toBe("policy_denied");
    expect(outside.error?.detail).toContain("work_roots");
    expect(outside.error?.detail).toContain(join(root, "b"));
    // Without a work_dir the session would work in the server's (root/a): refused the same.
    expect((await newSession(key, {})).response.status).toBe(403);
    expect(await sessionCount(key)).toBe(0);
    const inside = await newSession(key, { work_dir: join(root, "b") });
    expect(inside.response.status).toBe(201);
  });

  it("a key without worktrees may not ask for worktree mode", async () => {
    const { key } = await newKey({ worktrees: false });
    const { error, response } = await newSession(key, { worktree: true });
    expect(response.status).toBe(403);
    expect(error?.code).toBe("policy_denied");
    expect(error?.detail).toContain("worktrees");
    expect(await sessionCount(key)).toBe(0);
  });

  it("a policy narrowed after a session was made holds for its next message: 403, no run started", async () => {
    const { key, id } = await newKey();
    const session = await as(key).createSession({ permission_mode: "plan" });
    expect((await patchKey(id, { permission_modes: ["default"] })).response.status).toBe(200);
    const { error, response } = await message(key, session.id, { text: "hi" });
    expect(response.status).toBe(403);
    expect(error?.code).toBe("policy_denied");
    expect(error?.detail).toContain("plan is not among its permission_modes (default)");
    const after = await as(key).getSession(session.id);
    expect(after.usage.runs).toBe(0);
    const started = (await fake.invocations()).filter((r) => r.args.includes(session.id));
    expect(started).toEqual([]);
  });

  it("a message's own permission_mode is asked of the key's policy: 403 naming it, no run started", async () => {
    const { key } = await newKey();
    const session = await as(key).createSession({ permission_mode: "default" });
    for (const mode of ["bypassPermissions", "dangerously-skip-permissions"] as const) {
      const { error, response } = await message(key, session.id, {
        text: "hi",
        permission_mode: mode,
      });
      expect(response.status).toBe(403);
      expect(response.headers.get("content-type")).toBe("application/problem+json");
      expect(error?.code).toBe("policy_denied");
      expect(error?.detail).toContain(`${mode} is not among its permission_modes`);
    }
    const after = await as(key).getSession(session.id);
    expect(after.usage.runs).toBe(0);
    expect(after.active_run_id).toBeNull();
    expect(await fake.startsFor(session.id)).toEqual([]);
  });

  it("a message's own permission_mode that the key was granted runs in that mode", async () => {
    const { key, id } = await newKey();
    await patchKey(id, { permission_modes: ["default", "bypassPermissions"] });
    const session = await as(key).createSession({ permission_mode: "default" });
    const { data, response } = await as(key).POST("/v1/sessions/{id}/messages", {
      params: { path: { id: session.id }, header: { prefer: "respond-async" } },
      body: { text: "hi", permission_mode: "bypassPermissions" },
    });
    expect(response.status).toBe(202);
    const run = data as Run;
    const events = await eventsOf(as(key), run.id);
    await events.until("text_delta");
    const [start] = await fake.startsFor(session.id);
    expect(start?.args.join(" ")).toContain("--permission-mode bypassPermissions");
    const cancelled = await as(key).POST("/v1/runs/{id}/cancel", {
      params: { path: { id: run.id } },
    });
    expect(cancelled.response.status).toBe(200);
    await events.until("completion");
  });

  it("hooks: made only within their creator's policy, and each delivery runs with it", async () => {
    const ops = await newKey({ admin: true, permission_modes: ["acceptEdits"] });
    const name = `policy-${crypto.randomUUID()}`;
    const definition = {
      verification: "bearer",
      prompt_template: "Look at {{event}}",
    } as const;
    const hook = (permission_mode: components["schemas"]["PermissionMode"]) =>
      as(ops.key).POST("/v1/hooks", {
        body: { name, secret: HOOK_SECRET, ...definition, permission_mode },
      });
    const refused = await hook("bypassPermissions");
    expect(refused.response.status).toBe(403);
    expect(refused.error?.detail).toContain("permission_modes (acceptEdits)");
    const ofHook = { params: { path: { name } } };
    expect((await as(admin).GET("/v1/hooks/{name}", ofHook)).response.status).toBe(404);
    expect((await hook("acceptEdits")).response.status).toBe(201);

    // Its creator's policy narrowed afterwards: a delivery asks for more than it allows now.
    expect((await patchKey(ops.id, { permission_modes: ["plan"] })).response.status).toBe(200);
    // Signed with the hook's secret, no API key.
    const delivery = await appClient(t.app).POST("/v1/hooks/{name}/deliveries", {
      params: {
        path: { name },
        header: { "x-delivery-id": crypto.randomUUID(), "x-event": "push" },
      },
      headers: { Authorization: `Bearer ${HOOK_SECRET}` },
      body: {},
    });
    expect(delivery.response.status).toBe(403);
    expect(delivery.error?.code).toBe("policy_denied");
    const deliveries = await as(admin).GET("/v1/hooks/{name}/deliveries", ofHook);
    expect(deliveries.data?.data).toEqual([
      expect.objectContaining({
        outcome: "failed",
        detail: expect.stringContaining("permission_modes (plan)"),
        run_id: null,
      }),
    ]);
    // An update is judged by the policy the hook runs with: its creator's.
    const update = await as(admin).PUT("/v1/hooks/{name}", {
      ...ofHook,
      body: { ...definition, permission_mode: "default" },
    });
    expect(update.response.status).toBe(403);
  });
});

describe.each(BACKENDS)("a queued run's own settings on %s", (backend) => {
  let t: TestApp;
  let fake: FakeCli;
  let admin: string;

  beforeAll(async () => {
    fake = await fakeCli(longRun(30));
    t = await createTestApp(backend, {
      ...fake.bridgeEnv,
      AGENT_BRIDGE_AUTH: "keys",
      AGENT_BRIDGE_MAX_CONCURRENT_RUNS: "1",
    });
    admin = (await issueKey(t.database.db, { name: "admin", admin: true })).key;
  });
  afterAll(async () => {
    await t.close();
    await fake.cleanup();
  });

  const as = (key: string) => appClient(t.app, key);

  it("are asked of the key's policy again when the run starts: narrowed meanwhile, it fails policy_denied unstarted", async () => {
    const created = await as(admin).POST("/v1/keys", {
      body: {
        name: `k-${crypto.randomUUID()}`,
        admin: false,
        permission_modes: ["default", "bypassPermissions"],
      },
    });
    const { key, id } = created.data as NonNullable<typeof created.data>;
    const newSession = () => as(key).createSession({ permission_mode: "default" });
    const [first, second] = [await newSession(), await newSession()];
    const queue = (sessionId: string, body: components["schemas"]["PostMessage"]) =>
      as(key).POST("/v1/sessions/{id}/messages", {
        params: { path: { id: sessionId }, header: { prefer: "respond-async" } },
        body,
      });
    const held = (await queue(first.id, { text: "hold" })).data as Run;
    const holder = await eventsOf(as(key), held.id);
    await holder.until("text_delta");
    // The one slot is taken: this run waits in the queue with its own mode.
    const queued = await queue(second.id, { text: "bypass", permission_mode: "bypassPermissions" });
    expect(queued.response.status).toBe(202);
    const run = queued.data as Run;
    expect(run.status).toBe("queued");
    const narrowed = await as(admin).PATCH("/v1/keys/{id}", {
      params: { path: { id } },
      body: { permission_modes: ["default"] },
    });
    expect(narrowed.response.status).toBe(200);
    const cancelled = await as(key).POST("/v1/runs/{id}/cancel", {
      params: { path: { id: held.id } },
    });
    expect(cancelled.response.status).toBe(200);
    const events = await eventsOf(as(key), run.id);
    const completion = (await events.until("completion")).at(-1)?.data;
    expect(completion).toMatchObject({
      status: "failed",
      error_code: "policy_denied",
      error: expect.stringContaining(
        "bypassPermissions is not among its permission_modes (default)",
      ),
    });
    expect(await fake.startsFor(second.id)).toEqual([]);
  });
});

/** Reads the run's events (replay, then live) as they come. */
async function eventsOf(api: ReturnType<typeof appClient>, runId: string): Promise<SseReader> {
  const { response } = await api.GET("/v1/runs/{id}/events", {
    params: { path: { id: runId } },
    parseAs: "stream",
  });
  return SseReader.of(response);
}
