import { mkdirSync, mkdtempSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueKey } from "../../src/auth/keys.js";
import type { Session, UpdateSession } from "../../src/client/index.js";
import { sessions } from "../../src/store/schema.js";
import { createTestApp, type TestApp } from "../support/app.js";
import { appClient, untyped } from "../support/app-client.js";
import { BACKENDS } from "../support/db.js";

// PATCH /v1/sessions/{id}: a merge patch of a session's settings, checked as at creation (the
// agent's settings, the allowed roots, the key's policy); a patch refused changes nothing.

describe.each(BACKENDS)("changing a session's settings on %s", (backend) => {
  let t: TestApp;
  let root: string;
  let admin: string;

  beforeAll(async () => {
    root = realpathSync(mkdtempSync(join(tmpdir(), "agent-bridge-settings-")));
    for (const dir of ["a", "a/lib", "b", "outside"]) mkdirSync(join(root, dir));
    t = await createTestApp(backend, {
      AGENT_BRIDGE_AUTH: "keys",
      AGENT_BRIDGE_AGENTS: "claude,codex",
      AGENT_BRIDGE_ALLOWED_ROOTS: `${join(root, "a")},${join(root, "b")}`,
      AGENT_BRIDGE_WORK_DIR: join(root, "a"),
      AGENT_BRIDGE_PERMISSION_MODE: "plan",
      AGENT_BRIDGE_EFFORT: "high",
      AGENT_BRIDGE_CLAUDE_MODEL: "sonnet",
      AGENT_BRIDGE_BODY_LIMIT_BYTES: "1048576",
    });
    admin = (await issueKey(t.database.db, { name: "admin", admin: true })).key;
  });
  afterAll(async () => {
    await t.close();
    rmSync(root, { recursive: true, force: true });
  });

  const as = (key: string) => appClient(t.app, key);
  async function newKey(policy: { permission_modes?: string[]; work_roots?: string[] } = {}) {
    const { data, response } = await as(admin).POST("/v1/keys", {
      body: { name: `k-${crypto.randomUUID()}`, admin: false, ...policy } as never,
    });
    expect(response.status).toBe(201);
    return data as NonNullable<typeof data>;
  }
  /** A raw PATCH, for bodies the contract's types forbid. */
  const patchRaw = (key: string, id: string, body: string, type = "application/json") =>
    t.app.request(`/v1/sessions/${id}`, {
      method: "PATCH",
      headers: { Authorization: `Bearer ${key}`, "Content-Type": type },
      body,
    });
  const read = async (key: string, id: string) => as(key).getSession(id);
  /** Everything but the time it was read. */
  const settingsOf = ({ updated_at: _, last_activity_at: __, ...rest }: Session) => rest;

  it("changes the fields given, leaves the rest, moves updated_at, and null sets a field back to the default", async () => {
    const { key } = await newKey();
    const api = as(key);
    const created = await api.createSession({ title: "first", metadata: { a: "1" } });
    expect(created).toMatchObject({ model: "sonnet", effort: "high", permission_mode: "plan" });
    const changed = await api.updateSession(created.id, {
      title: "second",
      model: "opus",
      effort: "low",
      permission_mode: "acceptEdits",
      approvals: "api",
      approval_timeout_seconds: 30,
      max_turns: 5,
      max_budget_usd: 2.5,
      allowed_tools: ["Bash(npm test:*)"],
      disallowed_tools: ["WebFetch", "Bash(curl:*)"],
      add_dirs: ["lib"],
      metadata: { b: "2" },
    });
    expect(changed).toMatchObject({
      id: created.id,
      title: "second",
      model: "opus",
      effort: "low",
      permission_mode: "acceptEdits",
      approvals: "api",
      approval_timeout_seconds: 30,
      max_turns: 5,
      max_budget_usd: 2.5,
      allowed_tools: ["Bash(npm test:*)"],
      disallowed_tools: ["WebFetch", "Bash(curl:*)"],
      // Relative to the first allowed root, shown as its real path.
      add_dirs: [join(root, "a", "lib")],
      // Replaced whole, not merged.
      metadata: { b: "2" },
      agent: "claude",
      worktree: false,
    });
    expect(Date.parse(changed.updated_at)).toBeGreaterThanOrEqual(Date.parse(created.updated_at));
    expect(changed.updated_at).not.toBe(created.updated_at);
    expect(await read(key, created.id)).toEqual(changed);

    const reset = await api.updateSession(created.id, {
      title: null,
      model: null,
      effort: null,
      permission_mode: null,
      approvals: null,
      approval_timeout_seconds: null,
      max_turns: null,
      max_budget_usd: null,
      allowed_tools: null,
      disallowed_tools: null,
      add_dirs: null,
      metadata: null,
    });
    expect(reset).toMatchObject({
      title: null,
      model: "sonnet",
      effort: "high",
      permission_mode: "plan",
      approvals: "deny",
      approval_timeout_seconds: t.config.agents.approvalTimeoutSeconds,
      max_turns: null,
      max_budget_usd: null,
      allowed_tools: [],
      disallowed_tools: [],
      add_dirs: [],
      metadata: {},
    });
    // An empty patch changes nothing but updated_at.
    expect(settingsOf(await api.updateSession(created.id, {}))).toEqual(settingsOf(reset));
  });

  it("takes application/merge-patch+json as well as application/json, and no other type", async () => {
    const { key } = await newKey();
    const { id } = await as(key).createSession({});
    const merge = await patchRaw(
      key,
      id,
      JSON.stringify({ model: "haiku" }),
      "application/merge-patch+json",
    );
    expect(merge.status).toBe(200);
    expect(await merge.json()).toMatchObject({ model: "haiku" });
    const text = await patchRaw(key, id, "model=opus", "text/plain");
    expect(text.status).toBe(415);
    expect((await read(key, id)).model).toBe("haiku");
  });

  it("refuses the fields fixed at creation and unknown fields by name (400), changing nothing", async () => {
    const { key } = await newKey();
    const { id } = await as(key).createSession({ title: "kept" });
    const before = settingsOf(await read(key, id));
    for (const [field, value, says] of [
      ["agent", "codex", "agent is fixed"],
      ["work_dir", join(root, "b"), "work dir is fixed"],
      ["worktree", true, "worktree of its own is fixed"],
      ["colour", "blue", "no such setting"],
      ["constructor", 1, "no such setting"],
    ] as const) {
      const { response, error } = await untyped(
        patchRaw(key, id, JSON.stringify({ title: "changed", [field]: value })),
      );
      expect(response.status, field).toBe(400);
      expect(error.code).toBe("validation_failed");
      expect(error.errors).toEqual([expect.objectContaining({ location: "body", path: field })]);
      expect(error.errors?.[0]?.message).toContain(says);
    }
    expect(settingsOf(await read(key, id))).toEqual(before);
  });

  it("refuses unfit values with a 400 naming the field (U+0000, lone surrogates, huge, bad rules), changing nothing", async () => {
    const { key } = await newKey();
    const { id } = await as(key).createSession({ title: "kept" });
    const before = settingsOf(await read(key, id));
    const bodies: [string, string][] = [
      ["title", JSON.stringify({ title: "a\u0000b" })],
      ["metadata.k", '{"metadata":{"k":"\\ud800"}}'],
      ["title", JSON.stringify({ title: "x".repeat(201) })],
      ["system_prompt", JSON.stringify({ system_prompt: "x".repeat(100_001) })],
      [
        "metadata",
        JSON.stringify({
          metadata: Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`k${i}`, "v"])),
        }),
      ],
      ["model", JSON.stringify({ model: "--dangerously-skip-permissions x" })],
      ["disallowed_tools.0", JSON.stringify({ disallowed_tools: ["--add-dir=/"] })],
      ["disallowed_tools.0", JSON.stringify({ disallowed_tools: ["Bash,Write"] })],
      ["allowed_tools.0", JSON.stringify({ allowed_tools: ["Bash(\n)"] })],
      [
        "disallowed_tools",
        JSON.stringify({ disallowed_tools: Array.from({ length: 129 }, () => "Read") }),
      ],
      ["add_dirs", JSON.stringify({ add_dirs: Array.from({ length: 17 }, () => "lib") })],
      ["max_turns", JSON.stringify({ max_turns: 0 })],
      ["effort", JSON.stringify({ effort: "maximal" })],
    ];
    for (const [path, body] of bodies) {
      const { response, error } = await untyped(patchRaw(key, id, body));
      expect(response.status, body.slice(0, 80)).toBe(400);
      expect(error.code).toBe("validation_failed");
      expect(
        error.errors?.map((e) => e.path),
        body.slice(0, 80),
      ).toContain(path);
    }
    expect(settingsOf(await read(key, id))).toEqual(before);
  });

  it("refuses add_dirs outside the allowed roots, or missing, with 400 work_dir_not_allowed naming the entry", async () => {
    const { key } = await newKey();
    const { id } = await as(key).createSession({});
    for (const dir of [join(root, "outside"), join(root, "a", "missing"), "../outside"]) {
      const { response, error } = await as(key).PATCH("/v1/sessions/{id}", {
        params: { path: { id } },
        body: { add_dirs: ["lib", dir] },
      });
      expect(response.status, dir).toBe(400);
      expect(error?.code).toBe("work_dir_not_allowed");
      expect(error?.errors).toEqual([expect.objectContaining({ path: "add_dirs.1" })]);
    }
    expect((await read(key, id)).add_dirs).toEqual([]);
    // At creation the same.
    const { response } = await as(key).POST("/v1/sessions", {
      body: { add_dirs: [join(root, "outside")] },
    });
    expect(response.status).toBe(400);
    const made = await as(key).createSession({
      add_dirs: [join(root, "b")],
      disallowed_tools: ["Write"],
    });
    expect(made).toMatchObject({ add_dirs: [join(root, "b")], disallowed_tools: ["Write"] });
  });

  it("a patch the key's policy refuses is 403 policy_denied and changes nothing", async () => {
    const { key } = await newKey({
      permission_modes: ["plan", "default"],
      work_roots: [join(root, "a")],
    });
    const { id } = await as(key).createSession({ title: "kept" });
    const before = settingsOf(await read(key, id));
    const refused: [UpdateSession, string][] = [
      [{ permission_mode: "bypassPermissions", title: "changed" }, "permission_mode"],
      [{ add_dirs: [join(root, "b")], title: "changed" }, "add_dirs"],
    ];
    for (const [body, says] of refused) {
      const { response, error } = await as(key).PATCH("/v1/sessions/{id}", {
        params: { path: { id } },
        body,
      });
      expect(response.status).toBe(403);
      expect(error?.code).toBe("policy_denied");
      expect(error?.detail).toContain(says);
    }
    // A default key may not have a bypass mode either.
    const plain = await newKey();
    const other = await as(plain.key).createSession({});
    const bypass = await as(plain.key).PATCH("/v1/sessions/{id}", {
      params: { path: { id: other.id } },
      body: { permission_mode: "bypassPermissions" },
    });
    expect(bypass.response.status).toBe(403);
    expect(settingsOf(await read(key, id))).toEqual(before);
    // What the policy allows goes through.
    expect((await as(key).updateSession(id, { permission_mode: "default" })).permission_mode).toBe(
      "default",
    );
  });

  it("a codex session is refused what codex cannot honour (400 naming the field)", async () => {
    const { key } = await newKey();
    const { id } = await as(key).createSession({ agent: "codex", permission_mode: "plan" });
    const refused: [string, UpdateSession][] = [
      ["disallowed_tools", { disallowed_tools: ["WebFetch"] }],
      ["add_dirs", { add_dirs: ["lib"] }],
      ["approvals", { approvals: "api" }],
      ["permission_mode", { permission_mode: "dontAsk" }],
    ];
    for (const [field, body] of refused) {
      const { response, error } = await as(key).PATCH("/v1/sessions/{id}", {
        params: { path: { id } },
        body,
      });
      expect(response.status, field).toBe(400);
      expect(error?.errors).toEqual([expect.objectContaining({ path: field })]);
    }
    expect((await read(key, id)).add_dirs).toEqual([]);
  });

  it("another tenant's session is 404; an expired one is 410 session_expired; neither changes", async () => {
    const a = await newKey();
    const b = await newKey();
    const { id } = await as(a.key).createSession({ title: "mine" });
    const foreign = await as(b.key).PATCH("/v1/sessions/{id}", {
      params: { path: { id } },
      body: { title: "theirs" },
    });
    expect(foreign.response.status).toBe(404);
    expect(foreign.error?.code).toBe("session_not_found");
    await t.database.db.update(sessions).set({ expiredAt: new Date() }).where(eq(sessions.id, id));
    const expired = await as(a.key).PATCH("/v1/sessions/{id}", {
      params: { path: { id } },
      body: { title: "late" },
    });
    expect(expired.response.status).toBe(410);
    expect(expired.error?.code).toBe("session_expired");
    expect((await read(a.key, id)).title).toBe("mine");
  });

  it("two patches at once of different fields both hold", async () => {
    const { key } = await newKey();
    const api = as(key);
    const { id } = await api.createSession({});
    const patches = Array.from({ length: 6 }, (_, i) =>
      i % 2 === 0 ? { title: `t${i}` } : { max_turns: i },
    );
    await Promise.all([
      api.updateSession(id, { model: "opus" }),
      api.updateSession(id, { effort: "low" }),
      ...patches.map((p) => api.updateSession(id, p)),
    ]);
    const after = await read(key, id);
    expect(after).toMatchObject({ model: "opus", effort: "low" });
    expect(after.title).toMatch(/^t[024]$/);
    expect([1, 3, 5]).toContain(after.max_turns);
  });
});
