import { existsSync } from "node:fs";
import { readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { inArray } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../src/log.js";
import { sessions } from "../../src/store/schema.js";
import { SessionSweeper } from "../../src/worktrees/sweep.js";
import { createTestApp, listen, type TestApp } from "../support/app.js";
import { type ClaudeEnv, makeClaudeEnv } from "../support/claude-env.js";
import { REAL_CLI_BACKENDS } from "../support/db.js";
import { chunk, type MockAnthropic, startMockAnthropic } from "../support/mock-anthropic.js";
import { waitUntil } from "../support/process.js";
import { git, gitOk, makeRepo, type TestRepo } from "./repo.js";

// Worktree mode end to end: HTTP -> run manager -> the real `claude` CLI with `-w <session id>`
// (against a mock Messages API that scripts its tool calls) -> a real git clone of a bare origin.

interface WorktreeJson {
  path: string;
  branch: string;
  base_commit: string | null;
  state: string;
  created_at: string;
  removed_at: string | null;
}
interface SessionJson {
  id: string;
  worktree: boolean;
  expired_at: string | null;
  git_worktree: WorktreeJson | null;
}

const DAY_MS = 24 * 60 * 60 * 1000;
/** `git commit` as the agent runs it: the CLI's HOME has no git identity. */
const COMMIT = "git -c user.email=agent@test.invalid -c user.name=agent commit -q";

describe.each(REAL_CLI_BACKENDS)("worktree mode with the real claude CLI on %s", (backend) => {
  let mock: MockAnthropic;
  let ce: ClaudeEnv;
  let repo: TestRepo;
  let t: TestApp;
  let server: { url: string; close(): Promise<void> };

  beforeAll(async () => {
    mock = await startMockAnthropic({ quiet: true });
    ce = await makeClaudeEnv(mock.url);
    repo = await makeRepo();
    t = await createTestApp(backend, {
      ...ce.env,
      AGENT_BRIDGE_AUTH: "none",
      AGENT_BRIDGE_WORK_DIR: repo.clone,
      AGENT_BRIDGE_WORKTREE_ENABLED: "true",
      AGENT_BRIDGE_PERMISSION_MODE: "bypassPermissions",
    });
    server = await listen(t.app);
  });
  afterAll(async () => {
    await server.close();
    await t.close();
    await mock.close();
    await ce.cleanup();
    await repo.cleanup();
  });

  const newSession = async (): Promise<SessionJson> => {
    const res = await fetch(`${server.url}/v1/sessions`, { method: "POST" });
    expect(res.status).toBe(201);
    return res.json();
  };
  const getSession = async (id: string): Promise<SessionJson> =>
    (await fetch(`${server.url}/v1/sessions/${id}`)).json();
  const worktreeOf = async (id: string): Promise<WorktreeJson> => {
    const wt = (await getSession(id)).git_worktree;
    if (!wt) throw new Error(`session ${id} has no worktree record`);
    return wt;
  };
  const post = (id: string, text: string, headers: Record<string, string> = {}) =>
    fetch(`${server.url}/v1/sessions/${id}/messages`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json", ...headers },
      body: JSON.stringify({ text }),
    });
  /** One message whose turn runs `command` with the Bash tool; returns the tool's output. */
  const runBash = async (id: string, command: string): Promise<string> => {
    mock.script(
      { blocks: [{ type: "tool_use", name: "Bash", input: { command } }] },
      { blocks: [{ type: "text", text: "Done." }] },
    );
    const res = await post(id, `run: ${command}`);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ run: { status: "succeeded" }, text: "Done." });
    return lastToolOutput();
  };
  const lastToolOutput = (): string => {
    const messages = mock.mainRequests().at(-1)?.messages ?? [];
    for (const message of [...messages].reverse()) {
      if (!Array.isArray(message.content)) continue;
      const result = message.content.find((b) => b.type === "tool_result");
      if (!result) continue;
      const content = result.content;
      return typeof content === "string" ? content : JSON.stringify(content);
    }
    throw new Error("no tool result in the last request");
  };
  const branchExists = (id: string) =>
    gitOk(repo.clone, "rev-parse", "--verify", `refs/heads/worktree-${id}`);
  /** What the sweep sees as idle for four days (the default TTL is three). */
  const idleForDays = (ids: string[]) =>
    t.database.db
      .update(sessions)
      .set({ lastActivityAt: new Date(Date.now() - 4 * DAY_MS) })
      .where(inArray(sessions.id, ids));

  it("two sessions writing the same file name each see only their own, also on resume", async () => {
    const a = await newSession();
    const b = await newSession();
    expect(a).toMatchObject({ worktree: true, git_worktree: null });
    await runBash(a.id, "echo from-a > same.txt");
    await runBash(b.id, "echo from-b > same.txt");

    const wtA = await worktreeOf(a.id);
    const wtB = await worktreeOf(b.id);
    expect(wtA.path).not.toBe(wtB.path);
    expect(await readFile(join(wtA.path, "same.txt"), "utf8")).toBe("from-a\n");
    expect(await readFile(join(wtB.path, "same.txt"), "utf8")).toBe("from-b\n");
    expect(existsSync(join(repo.clone, "same.txt"))).toBe(false);

    // The next message resumes the CLI session in the same worktree.
    expect(await runBash(a.id, "pwd && cat same.txt")).toBe(`${wtA.path}\nfrom-a`);
    expect(await runBash(b.id, "pwd && cat same.txt")).toBe(`${wtB.path}\nfrom-b`);
    expect(await worktreeOf(a.id)).toEqual(wtA);
    const registered = git(repo.clone, "worktree", "list", "--porcelain");
    expect(registered.split(`branch refs/heads/worktree-${a.id}\n`)).toHaveLength(2);
  });

  it("records the worktree as it is on disk: directory, branch and base commit", async () => {
    const s = await newSession();
    await runBash(s.id, `echo work > work.txt && git add work.txt && ${COMMIT} -m work`);
    const wt = await worktreeOf(s.id);
    expect(wt).toMatchObject({
      path: join(repo.clone, ".claude", "worktrees", s.id),
      branch: `worktree-${s.id}`,
      base_commit: git(repo.clone, "rev-parse", "origin/HEAD"),
      state: "active",
      removed_at: null,
    });
    expect(git(wt.path, "rev-parse", "--show-toplevel")).toBe(wt.path);
    expect(git(wt.path, "rev-parse", "--abbrev-ref", "HEAD")).toBe(wt.branch);
    expect(git(wt.path, "log", "-1", "--format=%s")).toBe("work");
    expect(git(repo.clone, "worktree", "list", "--porcelain")).toContain(
      `worktree ${wt.path}\nHEAD ${git(wt.path, "rev-parse", "HEAD")}\nbranch refs/heads/${wt.branch}`,
    );
    // The list shows it too.
    const page = await (await fetch(`${server.url}/v1/sessions?limit=100`)).json();
    expect(page.data.find((x: SessionJson) => x.id === s.id)?.git_worktree).toEqual(wt);
  });

  it("a worktree directory deleted by hand comes back on the next message, commits kept", async () => {
    const s = await newSession();
    await runBash(s.id, `echo kept > kept.txt && git add kept.txt && ${COMMIT} -m kept`);
    const wt = await worktreeOf(s.id);
    await rm(wt.path, { recursive: true, force: true });

    const out = await runBash(s.id, "pwd && ls && git log -1 --format=%s");
    expect(out).toBe(`${wt.path}\nREADME.md\nkept.txt\nkept`);
    expect(existsSync(join(wt.path, "kept.txt"))).toBe(true);
    expect(await worktreeOf(s.id)).toMatchObject({ path: wt.path, state: "active" });
  });

  it("the sweep expires idle sessions: a clean worktree and its branch go, a dirty one stays, a busy session is left alone", async () => {
    const clean = await newSession();
    await runBash(clean.id, `echo done > done.txt && git add done.txt && ${COMMIT} -m done`);
    const dirty = await newSession();
    await runBash(dirty.id, "echo draft > draft.txt");
    const cleanPath = (await worktreeOf(clean.id)).path;
    const dirtyPath = (await worktreeOf(dirty.id)).path;

    // A session with a run going, idle on paper.
    const busy = await newSession();
    mock.script({
      blocks: [{ type: "text", text: chunk("slow ".repeat(200), 200).join("") }],
      delayMs: 50,
    });
    const run = await (await post(busy.id, "go slowly", { Prefer: "respond-async" })).json();
    // A run holds its session until its CLI is gone, which on a loaded machine can be after its
    // answer: the sweep would find the other two busy.
    for (const { id } of [clean, dirty])
      await waitUntil(() => !t.deps.runs.isActive(id), `session ${id} idle`);
    await idleForDays([clean.id, dirty.id, busy.id]);

    const lines: string[] = [];
    const sweeper = new SessionSweeper({
      db: t.database.db,
      runs: t.deps.runs,
      logger: createLogger("info", {}, (line) => lines.push(line)),
      ttlMs: t.config.sessions.ttlMs,
      intervalMs: 60_000,
      workDir: repo.clone,
      git: t.deps.git,
    });
    const report = await sweeper.sweep();
    await sweeper.stop();
    expect(report.expired).toEqual(expect.arrayContaining([clean.id, dirty.id]));
    expect(report.keptDirty).toEqual([dirty.id]);
    expect(report.busy).toEqual([busy.id]);

    expect(existsSync(cleanPath)).toBe(false);
    expect(branchExists(clean.id)).toBe(false);
    const cleanNow = await getSession(clean.id);
    expect(cleanNow.expired_at).not.toBeNull();
    expect(cleanNow.git_worktree).toMatchObject({ path: cleanPath, state: "removed" });
    expect(cleanNow.git_worktree?.removed_at).not.toBeNull();

    expect(await readFile(join(dirtyPath, "draft.txt"), "utf8")).toBe("draft\n");
    expect(branchExists(dirty.id)).toBe(true);
    const dirtyNow = await getSession(dirty.id);
    expect(dirtyNow.expired_at).not.toBeNull();
    expect(dirtyNow.git_worktree).toMatchObject({ path: dirtyPath, state: "kept_dirty" });
    const kept = lines.map((l) => JSON.parse(l)).find((l) => l.session_id === dirty.id);
    expect(kept).toMatchObject({ level: "warn", path: dirtyPath });
    expect(kept.msg).toContain("uncommitted changes");

    expect((await getSession(busy.id)).expired_at).toBeNull();
    // Cancelled once the CLI has taken its turn, so that no scripted turn is left for others.
    while (mock.pending() > 0) await new Promise((r) => setTimeout(r, 50));
    // (On a loaded machine the slow answer may have ended by now: then the cancel is too late.)
    const cancelled = await fetch(`${server.url}/v1/runs/${run.id}/cancel`, { method: "POST" });
    expect(await cancelled.json()).toMatchObject(
      cancelled.status === 200 ? { status: "cancelled" } : { code: "run_finished" },
    );

    // An expired session can be read but takes no more messages.
    const refused = await post(clean.id, "hello again");
    expect(refused.status).toBe(410);
    expect(await refused.json()).toMatchObject({ code: "session_expired" });
  });

  it("DELETE refuses a dirty worktree with 409 and removes it with ?force=true", async () => {
    const s = await newSession();
    await runBash(s.id, "echo draft > draft.txt");
    const wt = await worktreeOf(s.id);

    const refused = await fetch(`${server.url}/v1/sessions/${s.id}`, { method: "DELETE" });
    expect(refused.status).toBe(409);
    const problem = await refused.json();
    expect(problem).toMatchObject({ code: "worktree_dirty" });
    expect(problem.detail).toContain(wt.path);
    expect(existsSync(join(wt.path, "draft.txt"))).toBe(true);
    expect((await fetch(`${server.url}/v1/sessions/${s.id}`)).status).toBe(200);

    const forced = await fetch(`${server.url}/v1/sessions/${s.id}?force=true`, {
      method: "DELETE",
    });
    expect(forced.status).toBe(204);
    expect(existsSync(wt.path)).toBe(false);
    expect(branchExists(s.id)).toBe(false);
    expect((await fetch(`${server.url}/v1/sessions/${s.id}`)).status).toBe(404);
  });

  it("DELETE removes a clean worktree and its branch at once", async () => {
    const s = await newSession();
    await runBash(s.id, "true");
    const wt = await worktreeOf(s.id);
    const res = await fetch(`${server.url}/v1/sessions/${s.id}`, { method: "DELETE" });
    expect(res.status).toBe(204);
    expect(existsSync(wt.path)).toBe(false);
    expect(branchExists(s.id)).toBe(false);
  });
});

describe.each(REAL_CLI_BACKENDS)("worktree sessions outside a git repository on %s", (backend) => {
  let repo: TestRepo;
  let t: TestApp;

  beforeAll(async () => {
    repo = await makeRepo("not-a-repo");
    t = await createTestApp(backend, {
      AGENT_BRIDGE_AUTH: "none",
      AGENT_BRIDGE_WORK_DIR: repo.clone,
    });
  });
  afterAll(async () => {
    await t.close();
    await repo.cleanup();
  });

  const create = (body: unknown) =>
    t.app.request("/v1/sessions", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });

  it("refuses worktree: true with a 400 saying why", async () => {
    const res = await create({ worktree: true });
    expect(res.status).toBe(400);
    const problem = await res.json();
    expect(problem).toMatchObject({
      code: "worktree_unavailable",
      errors: [{ location: "body", path: "worktree" }],
    });
    expect(problem.detail).toContain(`${repo.clone} is not a git repository`);
  });

  it("creates a session without a worktree, and the sweep expires it when idle", async () => {
    const res = await create({});
    expect(res.status).toBe(201);
    const s = (await res.json()) as SessionJson;
    expect(s).toMatchObject({ worktree: false, git_worktree: null, expired_at: null });

    const sweeper = new SessionSweeper({
      db: t.database.db,
      runs: t.deps.runs,
      logger: createLogger("error", {}, () => {}),
      ttlMs: 1000,
      intervalMs: 60_000,
      workDir: repo.clone,
      git: t.deps.git,
    });
    expect((await sweeper.sweep(new Date(Date.now() - 60_000))).expired).not.toContain(s.id);
    expect((await sweeper.sweep(new Date(Date.now() + 60_000))).expired).toContain(s.id);
    const after = (await (await t.app.request(`/v1/sessions/${s.id}`)).json()) as SessionJson;
    expect(after.expired_at).not.toBeNull();
    // A second sweep finds nothing more to do.
    expect((await sweeper.sweep(new Date(Date.now() + 60_000))).expired).toEqual([]);
  });
});
