import { mkdirSync, mkdtempSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueKey } from "../../src/auth/keys.js";
import { createTestApp, requestAs, type TestApp } from "../support/app.js";
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

  const send = (key: string, method: string, path: string, body?: unknown) =>
    requestAs(t.app, key, path, {
      method,
      ...(body === undefined
        ? {}
        : { headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) }),
    });
  /** A key made by the admin over the API, with its record. */
  async function newKey(body: Record<string, unknown> = {}, asKey = admin) {
    const res = await send(asKey, "POST", "/v1/keys", {
      name: `k-${crypto.randomUUID()}`,
      ...body,
    });
    expect(res.status).toBe(201);
    return (await res.json()) as { key: string; id: string } & Record<string, unknown>;
  }
  const sessionCount = async (key: string) =>
    ((await (await send(key, "GET", "/v1/sessions")).json()) as { data: unknown[] }).data.length;

  it("a non-admin key asking for bypassPermissions gets 403 policy_denied naming the field, and no session", async () => {
    const { key } = await newKey();
    for (const mode of ["bypassPermissions", "dangerously-skip-permissions"]) {
      const res = await send(key, "POST", "/v1/sessions", { permission_mode: mode });
      expect(res.status).toBe(403);
      expect(res.headers.get("content-type")).toBe("application/problem+json");
      const problem = await res.json();
      expect(problem.code).toBe("policy_denied");
      expect(problem.detail).toContain("permission_modes");
      expect(problem.detail).toContain(`${mode} is not among`);
      expect(problem.detail).toContain("default, acceptEdits, auto, plan, dontAsk");
    }
    expect(await sessionCount(key)).toBe(0);
    expect((await send(key, "POST", "/v1/sessions", { permission_mode: "plan" })).status).toBe(201);
  });

  it("a key an admin granted bypassPermissions may use it; admin keys may by default", async () => {
    const { key, id } = await newKey();
    const granted = await send(admin, "PATCH", `/v1/keys/${id}`, {
      permission_modes: ["bypassPermissions", "default"],
    });
    expect(granted.status).toBe(200);
    expect((await granted.json()).permission_modes).toEqual(["default", "bypassPermissions"]);
    const res = await send(key, "POST", "/v1/sessions", { permission_mode: "bypassPermissions" });
    expect(res.status).toBe(201);
    expect((await res.json()).permission_mode).toBe("bypassPermissions");
    // Now only those two: acceptEdits is no longer among them.
    expect((await send(key, "POST", "/v1/sessions", {})).status).toBe(403);
    const asAdmin = await send(admin, "POST", "/v1/sessions", {
      permission_mode: "dangerously-skip-permissions",
    });
    expect(asAdmin.status).toBe(201);
  });

  it("the key listing shows each key's policy with its defaults filled in, and null restores a default", async () => {
    const { id } = await newKey({
      permission_modes: ["plan"],
      work_roots: [join(root, "b")],
      max_budget_usd: 12.5,
      worktrees: false,
      models: [" claude-opus-5-5", "claude-opus-5-5"],
    });
    const listed = async () =>
      (
        (await (await send(admin, "GET", "/v1/keys")).json()) as { data: { id: string }[] }
      ).data.find((k) => k.id === id);
    expect(await listed()).toMatchObject({
      permission_modes: ["plan"],
      work_roots: [join(root, "b")],
      max_budget_usd: 12.5,
      worktrees: false,
      models: ["claude-opus-5-5"],
    });
    const reset = await send(admin, "PATCH", `/v1/keys/${id}`, {
      permission_modes: null,
      work_roots: null,
      max_budget_usd: null,
      models: null,
    });
    expect(reset.status).toBe(200);
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
    const before = ((await (await send(admin, "GET", "/v1/keys")).json()) as { data: unknown[] })
      .data.length;
    const res = await send(admin, "POST", "/v1/keys", {
      name: "escaping",
      work_roots: [join(root, "b"), join(root, "outside")],
    });
    expect(res.status).toBe(400);
    const problem = await res.json();
    expect(problem.code).toBe("validation_failed");
    expect(problem.errors).toEqual([
      expect.objectContaining({ location: "body", path: "work_roots.1" }),
    ]);
    expect(problem.detail).toContain("outside the allowed roots");
    expect(
      ((await (await send(admin, "GET", "/v1/keys")).json()) as { data: unknown[] }).data,
    ).toHaveLength(before);
    const { key, id } = await newKey();
    const bad = await send(admin, "PATCH", `/v1/keys/${id}`, { work_roots: ["/"] });
    expect(bad.status).toBe(400);
    const selfGrant = await send(key, "PATCH", `/v1/keys/${id}`, {
      permission_modes: ["bypassPermissions"],
    });
    expect(selfGrant.status).toBe(403);
    expect((await selfGrant.json()).code).toBe("forbidden");
    const missing = await send(admin, "PATCH", `/v1/keys/${crypto.randomUUID()}`, {
      worktrees: true,
    });
    expect(missing.status).toBe(404);
    expect((await missing.json()).code).toBe("key_not_found");
  });

  it("a session's work dir (given or the server's) must lie in the key's work roots", async () => {
    const { key } = await newKey({ work_roots: [join(root, "b")] });
    const outside = await send(key, "POST", "/v1/sessions", { work_dir: join(root, "a") });
    expect(outside.status).toBe(403);
    const problem = await outside.json();
    expect(problem.code).toBe("policy_denied");
    expect(problem.detail).toContain("work_roots");
    expect(problem.detail).toContain(join(root, "b"));
    // Without a work_dir the session would work in the server's (root/a): refused the same.
    expect((await send(key, "POST", "/v1/sessions", {})).status).toBe(403);
    expect(await sessionCount(key)).toBe(0);
    const inside = await send(key, "POST", "/v1/sessions", { work_dir: join(root, "b") });
    expect(inside.status).toBe(201);
  });

  it("a key without worktrees may not ask for worktree mode", async () => {
    const { key } = await newKey({ worktrees: false });
    const res = await send(key, "POST", "/v1/sessions", { worktree: true });
    expect(res.status).toBe(403);
    const problem = await res.json();
    expect(problem.code).toBe("policy_denied");
    expect(problem.detail).toContain("worktrees");
    expect(await sessionCount(key)).toBe(0);
  });

  it("a policy narrowed after a session was made holds for its next message: 403, no run started", async () => {
    const { key, id } = await newKey();
    const session = await (
      await send(key, "POST", "/v1/sessions", { permission_mode: "plan" })
    ).json();
    expect(
      (await send(admin, "PATCH", `/v1/keys/${id}`, { permission_modes: ["default"] })).status,
    ).toBe(200);
    const res = await send(key, "POST", `/v1/sessions/${session.id}/messages`, { text: "hi" });
    expect(res.status).toBe(403);
    const problem = await res.json();
    expect(problem.code).toBe("policy_denied");
    expect(problem.detail).toContain("plan is not among its permission_modes (default)");
    const after = await (await send(key, "GET", `/v1/sessions/${session.id}`)).json();
    expect(after.usage.runs).toBe(0);
    const started = (await fake.invocations()).filter((r) => r.args.includes(session.id));
    expect(started).toEqual([]);
  });

  it("a message's own permission_mode is asked of the key's policy: 403 naming it, no run started", async () => {
    const { key } = await newKey();
    const session = await (
      await send(key, "POST", "/v1/sessions", { permission_mode: "default" })
    ).json();
    for (const mode of ["bypassPermissions", "dangerously-skip-permissions"]) {
      const res = await send(key, "POST", `/v1/sessions/${session.id}/messages`, {
        text: "hi",
        permission_mode: mode,
      });
      expect(res.status).toBe(403);
      expect(res.headers.get("content-type")).toBe("application/problem+json");
      const problem = await res.json();
      expect(problem.code).toBe("policy_denied");
      expect(problem.detail).toContain(`${mode} is not among its permission_modes`);
    }
    const after = await (await send(key, "GET", `/v1/sessions/${session.id}`)).json();
    expect(after.usage.runs).toBe(0);
    expect(after.active_run_id).toBeNull();
    expect(await fake.startsFor(session.id)).toEqual([]);
  });

  it("a message's own permission_mode that the key was granted runs in that mode", async () => {
    const { key, id } = await newKey();
    await send(admin, "PATCH", `/v1/keys/${id}`, {
      permission_modes: ["default", "bypassPermissions"],
    });
    const session = await (
      await send(key, "POST", "/v1/sessions", { permission_mode: "default" })
    ).json();
    const res = await requestAs(t.app, key, `/v1/sessions/${session.id}/messages`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Prefer: "respond-async" },
      body: JSON.stringify({ text: "hi", permission_mode: "bypassPermissions" }),
    });
    expect(res.status).toBe(202);
    const run = await res.json();
    const events = SseReader.of(await send(key, "GET", `/v1/runs/${run.id}/events`));
    await events.until("text_delta");
    const [start] = await fake.startsFor(session.id);
    expect(start?.args.join(" ")).toContain("--permission-mode bypassPermissions");
    expect((await send(key, "POST", `/v1/runs/${run.id}/cancel`)).status).toBe(200);
    await events.until("completion");
  });

  it("hooks: made only within their creator's policy, and each delivery runs with it", async () => {
    const ops = await newKey({ admin: true, permission_modes: ["acceptEdits"] });
    const name = `policy-${crypto.randomUUID()}`;
    const hook = (body: Record<string, unknown>) =>
      send(ops.key, "POST", "/v1/hooks", {
        name,
        verification: "bearer",
        secret: HOOK_SECRET,
        prompt_template: "Look at {{event}}",
        ...body,
      });
    const refused = await hook({ permission_mode: "bypassPermissions" });
    expect(refused.status).toBe(403);
    expect((await refused.json()).detail).toContain("permission_modes (acceptEdits)");
    expect((await send(admin, "GET", `/v1/hooks/${name}`)).status).toBe(404);
    expect((await hook({ permission_mode: "acceptEdits" })).status).toBe(201);

    // Its creator's policy narrowed afterwards: a delivery asks for more than it allows now.
    expect(
      (await send(admin, "PATCH", `/v1/keys/${ops.id}`, { permission_modes: ["plan"] })).status,
    ).toBe(200);
    const delivery = await t.app.request(`/v1/hooks/${name}/deliveries`, {
      method: "POST",
      headers: {
        "Content-Type": "application/json",
        Authorization: `Bearer ${HOOK_SECRET}`,
        "X-Delivery-Id": crypto.randomUUID(),
        "X-Event": "push",
      },
      body: "{}",
    });
    expect(delivery.status).toBe(403);
    expect((await delivery.json()).code).toBe("policy_denied");
    const deliveries = await (await send(admin, "GET", `/v1/hooks/${name}/deliveries`)).json();
    expect(deliveries.data).toEqual([
      expect.objectContaining({
        outcome: "failed",
        detail: expect.stringContaining("permission_modes (plan)"),
        run_id: null,
      }),
    ]);
    // An update is judged by the policy the hook runs with: its creator's.
    const update = await send(admin, "PUT", `/v1/hooks/${name}`, {
      verification: "bearer",
      prompt_template: "Look at {{event}}",
      permission_mode: "default",
    });
    expect(update.status).toBe(403);
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

  const send = (key: string, method: string, path: string, body?: unknown, prefer?: string) =>
    requestAs(t.app, key, path, {
      method,
      headers: { "Content-Type": "application/json", ...(prefer ? { Prefer: prefer } : {}) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });

  it("are asked of the key's policy again when the run starts: narrowed meanwhile, it fails policy_denied unstarted", async () => {
    const created = await send(admin, "POST", "/v1/keys", {
      name: `k-${crypto.randomUUID()}`,
      permission_modes: ["default", "bypassPermissions"],
    });
    const { key, id } = await created.json();
    const newSession = async () =>
      (await send(key, "POST", "/v1/sessions", { permission_mode: "default" })).json();
    const [first, second] = [await newSession(), await newSession()];
    const holding = await send(
      key,
      "POST",
      `/v1/sessions/${first.id}/messages`,
      { text: "hold" },
      "respond-async",
    );
    const held = await holding.json();
    const holder = SseReader.of(await send(key, "GET", `/v1/runs/${held.id}/events`));
    await holder.until("text_delta");
    // The one slot is taken: this run waits in the queue with its own mode.
    const queued = await send(
      key,
      "POST",
      `/v1/sessions/${second.id}/messages`,
      { text: "bypass", permission_mode: "bypassPermissions" },
      "respond-async",
    );
    expect(queued.status).toBe(202);
    const run = await queued.json();
    expect(run.status).toBe("queued");
    expect(
      (await send(admin, "PATCH", `/v1/keys/${id}`, { permission_modes: ["default"] })).status,
    ).toBe(200);
    expect((await send(key, "POST", `/v1/runs/${held.id}/cancel`)).status).toBe(200);
    const events = SseReader.of(await send(key, "GET", `/v1/runs/${run.id}/events`));
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
