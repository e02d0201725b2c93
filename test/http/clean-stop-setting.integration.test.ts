import { mkdtempSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueKey } from "../../src/auth/keys.js";
import { createTestApp, type TestApp } from "../support/app.js";
import { appClient } from "../support/app-client.js";
import { BACKENDS } from "../support/db.js";
import { codeBlocks, docSection } from "../support/readme.js";

// A session's `require_clean_work_dir` over the API: given at creation, changed by PATCH (null
// sets it back to false), and refused for codex as its other unsupported settings.

describe.each(BACKENDS)("a session's require_clean_work_dir on %s", (backend) => {
  let t: TestApp;
  let root: string;
  let key: string;

  beforeAll(async () => {
    root = realpathSync(mkdtempSync(join(tmpdir(), "agent-bridge-clean-stop-")));
    t = await createTestApp(backend, {
      AGENT_BRIDGE_AUTH: "keys",
      AGENT_BRIDGE_AGENTS: "claude,codex",
      AGENT_BRIDGE_WORK_DIR: root,
    });
    key = (await issueKey(t.database.db, { name: "admin", admin: true })).key;
  });
  afterAll(async () => {
    await t.close();
    rmSync(root, { recursive: true, force: true });
  });

  const api = () => appClient(t.app, key);
  const patch = (id: string, body: Record<string, unknown>) =>
    t.app.request(`/v1/sessions/${id}`, {
      method: "PATCH",
      headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
  const create = (body: Record<string, unknown>) =>
    t.app.request("/v1/sessions", {
      method: "POST",
      headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });

  it("is false unless given, is kept as given at creation, and PATCH changes it (null: back to false)", async () => {
    const plain = await api().createSession({});
    expect(plain.require_clean_work_dir).toBe(false);
    const { id, require_clean_work_dir } = await api().createSession({
      require_clean_work_dir: true,
    });
    expect(require_clean_work_dir).toBe(true);
    expect((await api().getSession(id)).require_clean_work_dir).toBe(true);

    const off = await patch(id, { require_clean_work_dir: false });
    expect(off.status).toBe(200);
    expect(((await off.json()) as { require_clean_work_dir: boolean }).require_clean_work_dir).toBe(
      false,
    );
    expect((await patch(id, { require_clean_work_dir: true })).status).toBe(200);
    // A patch of another field leaves it.
    expect((await patch(id, { title: "renamed" })).status).toBe(200);
    expect((await api().getSession(id)).require_clean_work_dir).toBe(true);
    expect((await patch(id, { require_clean_work_dir: null })).status).toBe(200);
    expect((await api().getSession(id)).require_clean_work_dir).toBe(false);
  });

  it("the example of docs/api.md is a session created with the check on", async () => {
    const [example] = codeBlocks(
      await docSection("docs/api.md", "A clean work dir before stopping"),
      "json",
    );
    const res = await create(JSON.parse(example ?? "null"));
    expect(res.status).toBe(201);
    expect(await res.json()).toMatchObject({
      permission_mode: "acceptEdits",
      require_clean_work_dir: true,
    });
  });

  it("refuses what is no boolean with a 400 naming the field, changing nothing", async () => {
    for (const value of ["true", 1, "\u0000", {}]) {
      const res = await create({ require_clean_work_dir: value });
      expect(res.status, JSON.stringify(value)).toBe(400);
      expect(JSON.stringify(await res.json())).toContain("require_clean_work_dir");
    }
    const { id } = await api().createSession({});
    const res = await patch(id, { require_clean_work_dir: "yes" });
    expect(res.status).toBe(400);
    expect((await api().getSession(id)).require_clean_work_dir).toBe(false);
  });

  it("a codex session is refused it, at creation and by PATCH (400 naming the field), changing nothing", async () => {
    const created = await create({ agent: "codex", require_clean_work_dir: true });
    expect(created.status).toBe(400);
    expect(((await created.json()) as { errors: unknown[] }).errors).toEqual([
      expect.objectContaining({
        path: "require_clean_work_dir",
        message: expect.stringContaining("the codex agent cannot honour this"),
      }),
    ]);
    const { id } = await api().createSession({ agent: "codex" });
    const patched = await patch(id, { require_clean_work_dir: true });
    expect(patched.status).toBe(400);
    expect(((await patched.json()) as { errors: unknown[] }).errors).toEqual([
      expect.objectContaining({ path: "require_clean_work_dir" }),
    ]);
    expect((await api().getSession(id)).require_clean_work_dir).toBe(false);
    // false is what codex does anyway.
    expect((await patch(id, { require_clean_work_dir: false })).status).toBe(200);
  });
});
