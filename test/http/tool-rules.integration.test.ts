import { mkdtempSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueKey } from "../../src/auth/keys.js";
import { createTestApp, type TestApp } from "../support/app.js";
import { BACKENDS } from "../support/db.js";
import { codeBlocks, docSection } from "../support/readme.js";

// Tool rules over the API: a key's (POST and PATCH /v1/keys) and a session's (created and
// patched), stored as given, bounded and checked (400 naming the field, nothing changed), and
// refused for a codex session, which has no hooks to enforce them with.

const RM_ASKED = [{ tool: "Bash", command: "rm *", decision: "ask" }];

describe.each(BACKENDS)("tool rules over the API on %s", (backend) => {
  let t: TestApp;
  let root: string;
  let admin: string;

  beforeAll(async () => {
    root = realpathSync(mkdtempSync(join(tmpdir(), "agent-bridge-tool-rules-")));
    t = await createTestApp(backend, {
      AGENT_BRIDGE_AUTH: "keys",
      AGENT_BRIDGE_AGENTS: "claude,codex",
      AGENT_BRIDGE_ALLOWED_ROOTS: root,
      AGENT_BRIDGE_WORK_DIR: root,
    });
    admin = (await issueKey(t.database.db, { name: "admin", admin: true })).key;
  });
  afterAll(async () => {
    await t.close();
    rmSync(root, { recursive: true, force: true });
  });

  const call = (key: string, method: string, path: string, body?: unknown) =>
    t.app.request(path, {
      method,
      headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  const newKey = async (body: Record<string, unknown> = {}) => {
    const res = await call(admin, "POST", "/v1/keys", {
      name: `k-${crypto.randomUUID()}`,
      ...body,
    });
    expect(res.status).toBe(201);
    return (await res.json()) as { id: string; key: string; tool_rules: unknown };
  };
  const newSession = async (key: string, body: Record<string, unknown> = {}) => {
    const res = await call(key, "POST", "/v1/sessions", body);
    expect(res.status).toBe(201);
    return (await res.json()) as { id: string; tool_rules: unknown };
  };
  /** The problem's field paths. */
  const refusedFields = async (res: Response) => {
    expect(res.status).toBe(400);
    const problem = (await res.json()) as { errors: { path: string }[] };
    return problem.errors.map((e) => e.path);
  };

  it("a key's tool_rules are stored as given, shown, changed by PATCH, and left alone when not named", async () => {
    const created = await newKey({ tool_rules: [{ preset: "plan" }, ...RM_ASKED] });
    expect(created.tool_rules).toEqual([{ preset: "plan" }, ...RM_ASKED]);
    const patched = await call(admin, "PATCH", `/v1/keys/${created.id}`, {
      tool_rules: [{ tool: "mcp__github__*", decision: "deny", reason: "no GitHub" }],
    });
    expect(patched.status).toBe(200);
    expect(((await patched.json()) as { tool_rules: unknown }).tool_rules).toEqual([
      { tool: "mcp__github__*", decision: "deny", reason: "no GitHub" },
    ]);
    const untouched = await call(admin, "PATCH", `/v1/keys/${created.id}`, { worktrees: false });
    expect(((await untouched.json()) as { tool_rules: unknown }).tool_rules).toHaveLength(1);
    expect((await newKey()).tool_rules).toEqual([]);
  });

  it("a session's tool_rules are stored at creation, replaced by PATCH, and reset to none by null", async () => {
    const { key } = await newKey();
    const session = await newSession(key, { tool_rules: [{ preset: "supervised" }] });
    expect(session.tool_rules).toEqual([{ preset: "supervised" }]);
    const replaced = await call(key, "PATCH", `/v1/sessions/${session.id}`, {
      tool_rules: RM_ASKED,
    });
    expect(replaced.status).toBe(200);
    expect(((await replaced.json()) as { tool_rules: unknown }).tool_rules).toEqual(RM_ASKED);
    const reset = await call(key, "PATCH", `/v1/sessions/${session.id}`, { tool_rules: null });
    expect(((await reset.json()) as { tool_rules: unknown }).tool_rules).toEqual([]);
    expect((await newSession(key)).tool_rules).toEqual([]);
  });

  it("unfit rules are a 400 naming the field, for a session and a key, and change nothing", async () => {
    const { key } = await newKey();
    const session = await newSession(key, { tool_rules: RM_ASKED });
    const unfit: [string, unknown][] = [
      ["tool_rules", Array.from({ length: 65 }, () => RM_ASKED[0])],
      ["tool_rules.0.tool", [{ tool: "Bash\u0000", decision: "ask" }]],
      ["tool_rules.0.tool", [{ tool: "B\ud800", decision: "ask" }]],
      ["tool_rules.0.tool", [{ tool: "x".repeat(257), decision: "ask" }]],
      ["tool_rules.0.command", [{ tool: "Read", command: "cat *", decision: "ask" }]],
      ["tool_rules.0.reason", [{ tool: "Bash", decision: "deny", reason: "a\u0007b" }]],
      ["tool_rules.0", [{ tool: "Bash", decision: "maybe" }]],
      ["tool_rules.0", [{ preset: "paranoid" }]],
      ["tool_rules.0", [{ tool: "Bash", decision: "ask", extra: 1 }]],
    ];
    for (const [field, rules] of unfit) {
      const created = await call(key, "POST", "/v1/sessions", { tool_rules: rules });
      expect(await refusedFields(created), field).toEqual([field]);
      const patched = await call(key, "PATCH", `/v1/sessions/${session.id}`, { tool_rules: rules });
      expect(await refusedFields(patched), field).toEqual([field]);
      const keyed = await call(admin, "POST", "/v1/keys", { name: "k", tool_rules: rules });
      expect(await refusedFields(keyed), field).toEqual([field]);
    }
    const kept = await call(key, "GET", `/v1/sessions/${session.id}`);
    expect(((await kept.json()) as { tool_rules: unknown }).tool_rules).toEqual(RM_ASKED);
  });

  it("the session of docs/api.md's Tool rules example is made with its rules as written", async () => {
    const [example] = codeBlocks(await docSection("docs/api.md", "Tool rules"), "json");
    const body = JSON.parse(example ?? "");
    const { key } = await newKey({ permission_modes: ["bypassPermissions"] });
    expect((await newSession(key, body)).tool_rules).toEqual(body.tool_rules);
  });

  it("a codex session is refused tool_rules (400 naming the field): codex exec has no hooks", async () => {
    const { key } = await newKey();
    const created = await call(key, "POST", "/v1/sessions", {
      agent: "codex",
      permission_mode: "plan",
      tool_rules: RM_ASKED,
    });
    expect(await refusedFields(created)).toEqual(["tool_rules"]);
    const session = await newSession(key, { agent: "codex", permission_mode: "plan" });
    const patched = await call(key, "PATCH", `/v1/sessions/${session.id}`, {
      tool_rules: RM_ASKED,
    });
    expect(await refusedFields(patched)).toEqual(["tool_rules"]);
  });
});
