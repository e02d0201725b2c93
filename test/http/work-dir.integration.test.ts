import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Problem } from "../../src/client/index.js";
import { hooks, sessions } from "../../src/store/schema.js";
import { createTestApp, type TestApp } from "../support/app.js";
import { appClient } from "../support/app-client.js";
import { BACKENDS } from "../support/db.js";

// A work dir must be a directory: a file (or a link to one) inside the allowed roots is refused
// where it is given, not found out by every run failing with `spawn ENOTDIR`.

describe.each(BACKENDS)("a work_dir that is not a directory, on %s", (backend) => {
  let t: TestApp;
  let api: ReturnType<typeof appClient>;
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
    api = appClient(t.app);
    const { response } = await createHook(hook);
    expect(response.status).toBe(201);
  });
  afterAll(async () => {
    await t.close();
    await rm(root, { recursive: true, force: true });
  });

  const hookBody = {
    verification: "bearer",
    secret: "bearer-secret-0123456789",
    prompt_template: "Review it",
  } as const;
  const createHook = (name: string, work_dir?: string) =>
    api.POST("/v1/hooks", { body: { name, ...hookBody, ...(work_dir ? { work_dir } : {}) } });
  const updateHook = (work_dir: string) =>
    api.PUT("/v1/hooks/{name}", {
      params: { path: { name: hook } },
      body: { ...hookBody, work_dir },
    });
  const newSession = (work_dir: string) => api.POST("/v1/sessions", { body: { work_dir } });

  const refused = ({ error, response }: { error?: Problem; response: Response }) => {
    expect(response.status).toBe(400);
    expect(response.headers.get("content-type")).toBe("application/problem+json");
    expect(error?.errors).toEqual([
      {
        location: "body",
        path: "work_dir",
        message: expect.stringContaining("is not a directory"),
      },
    ]);
    return error;
  };

  for (const given of ["notes.txt", "link-to-file"]) {
    it(`a session's work_dir ${given}: 400 work_dir_not_allowed, no session`, async () => {
      const before = await t.database.db.$count(sessions);
      const problem = refused(await newSession(given));
      expect(problem?.code).toBe("work_dir_not_allowed");
      expect(await t.database.db.$count(sessions)).toBe(before);
    });

    it(`a hook's work_dir ${given}: 400 on create and on update, the hook unchanged`, async () => {
      const before = await t.database.db.$count(hooks);
      const created = await createHook(`${hook}-${randomBytes(2).toString("hex")}`, given);
      expect(refused(created)?.code).toBe("validation_failed");
      expect(await t.database.db.$count(hooks)).toBe(before);

      expect(refused(await updateHook(given))?.code).toBe("validation_failed");
      const { data } = await api.GET("/v1/hooks/{name}", { params: { path: { name: hook } } });
      expect(data?.work_dir).toBeNull();
    });
  }

  it("a directory is still taken, by session and by hook", async () => {
    const session = await newSession("project");
    expect(session.response.status).toBe(201);
    expect(session.data?.work_dir).toBe(join(root, "project"));
    expect((await updateHook("project")).response.status).toBe(200);
  });
});
