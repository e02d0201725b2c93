import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hooks, sessions } from "../../src/store/schema.js";
import { createTestApp, listen, type TestApp } from "../support/app.js";
import { BACKENDS } from "../support/db.js";

// A work dir must be a directory: a file (or a link to one) inside the allowed roots is refused
// where it is given, not found out by every run failing with `spawn ENOTDIR`.

describe.each(BACKENDS)("a work_dir that is not a directory, on %s", (backend) => {
  let t: TestApp;
  let server: { url: string; close(): Promise<void> };
  let root: string;
  const hook = `wd-${randomBytes(3).toString("hex")}`;

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), "agent-bridge-workdir-"));
    await mkdir(join(root, "project"));
    await writeFile(join(root, "notes.txt"), "a file\n");
    await symlink(join(root, "notes.txt"), join(root, "link-to-file"));
    t = await createTestApp(backend, {
      AGENT_BRIDGE_ALLOWED_ROOTS: root,
      AGENT_BRIDGE_WORK_DIR: root,
    });
    server = await listen(t.app);
    const res = await send("POST", "/v1/hooks", hookBody({ name: hook }));
    expect(res.status).toBe(201);
  });
  afterAll(async () => {
    await server.close();
    await t.close();
    await rm(root, { recursive: true, force: true });
  });

  const send = (method: string, path: string, body: unknown) =>
    fetch(`${server.url}${path}`, {
      method,
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
  const hookBody = (fields: Record<string, unknown>) => ({
    verification: "bearer",
    secret: "bearer-secret-0123456789",
    prompt_template: "Review it",
    ...fields,
  });

  const refused = async (res: Response) => {
    expect(res.status).toBe(400);
    expect(res.headers.get("content-type")).toBe("application/problem+json");
    const problem = await res.json();
    expect(problem.errors).toEqual([
      {
        location: "body",
        path: "work_dir",
        message: expect.stringContaining("is not a directory"),
      },
    ]);
    return problem;
  };

  for (const given of ["notes.txt", "link-to-file"]) {
    it(`a session's work_dir ${given}: 400 work_dir_not_allowed, no session`, async () => {
      const before = await t.database.db.$count(sessions);
      const problem = await refused(await send("POST", "/v1/sessions", { work_dir: given }));
      expect(problem.code).toBe("work_dir_not_allowed");
      expect(await t.database.db.$count(sessions)).toBe(before);
    });

    it(`a hook's work_dir ${given}: 400 on create and on update, the hook unchanged`, async () => {
      const before = await t.database.db.$count(hooks);
      const created = await send(
        "POST",
        "/v1/hooks",
        hookBody({ name: `${hook}-${randomBytes(2).toString("hex")}`, work_dir: given }),
      );
      expect((await refused(created)).code).toBe("validation_failed");
      expect(await t.database.db.$count(hooks)).toBe(before);

      const updated = await send("PUT", `/v1/hooks/${hook}`, hookBody({ work_dir: given }));
      expect((await refused(updated)).code).toBe("validation_failed");
      expect((await (await fetch(`${server.url}/v1/hooks/${hook}`)).json()).work_dir).toBeNull();
    });
  }

  it("a directory is still taken, by session and by hook", async () => {
    const session = await send("POST", "/v1/sessions", { work_dir: "project" });
    expect(session.status).toBe(201);
    expect((await session.json()).work_dir).toBe(join(root, "project"));
    const updated = await send("PUT", `/v1/hooks/${hook}`, hookBody({ work_dir: "project" }));
    expect(updated.status).toBe(200);
  });
});
