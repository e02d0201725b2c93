import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { codexPlugin } from "../../src/agents/codex/plugin.js";
import { type Git, GitRunner, type GitRunnerOptions } from "../../src/worktrees/git.js";
import {
  checkWorktreePrerequisites,
  WorktreePrerequisiteError,
} from "../../src/worktrees/prerequisites.js";
import {
  ensureSessionWorktree,
  findSessionWorktree,
  isDirty,
  removeSessionWorktree,
  restoreSessionWorktree,
} from "../../src/worktrees/worktree.js";
import { testSandbox } from "../support/sandbox.js";
import { git, gitOk, makeRepo, type RepoShape, type TestRepo } from "./repo.js";

// The git side of worktree mode on real repositories, without the CLI: worktrees are made here
// the way the CLI makes them (`-w ID`: a branch off origin/HEAD, locked, left locked). The server's
// git runs as the server where there is no sandbox, and in one (the repository's `.git` writable,
// no network) where there is: each works alike.

const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: process.env.HOME ?? "/" };
const runners: [string, GitRunnerOptions][] = [
  ["plain", { env }],
  ...(testSandbox
    ? [["sandboxed", { env, sandbox: testSandbox }] as [string, GitRunnerOptions]]
    : []),
];
const serverGit = (dir: string) => new GitRunner({ env }).forSession(null, dir);

const repos: TestRepo[] = [];
afterAll(async () => {
  for (const repo of repos) await repo.cleanup();
});
async function repo(shape: RepoShape = "complete") {
  const r = await makeRepo(shape);
  repos.push(r);
  return r;
}

function worktreeAsTheCliMakesIt(clone: string, id: string): string {
  const path = join(clone, ".claude", "worktrees", id);
  git(clone, "worktree", "add", "-q", "-b", `worktree-${id}`, path, "origin/HEAD");
  git(clone, "worktree", "lock", "--reason", `claude session ${id} (pid 1 start 1)`, path);
  return path;
}

async function prerequisiteError(dir: string): Promise<WorktreePrerequisiteError> {
  const err = await checkWorktreePrerequisites(serverGit(dir)).then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(err instanceof WorktreePrerequisiteError))
    throw new Error(`expected a refusal, got ${err}`);
  return err;
}

describe("worktree prerequisites", () => {
  it("accepts a clone whose origin/HEAD resolves", async () => {
    await expect(
      checkWorktreePrerequisites(serverGit((await repo()).clone)),
    ).resolves.toBeUndefined();
  });

  it("names each missing prerequisite with the command that fixes it", async () => {
    const plain = await prerequisiteError((await repo("not-a-repo")).clone);
    expect(plain.missing).toBe("git_repository");
    expect(plain.message).toMatch(/is not a git repository; clone one there with `git clone/);

    const noOrigin = await repo("no-origin");
    const lonely = await prerequisiteError(noOrigin.clone);
    expect(lonely.missing).toBe("origin_remote");
    expect(lonely.message).toContain('has no "origin" remote');
    expect(lonely.message).toContain(`git -C ${noOrigin.clone} remote add origin <url>`);

    const noHead = await repo("no-origin-head");
    const headless = await prerequisiteError(noHead.clone);
    expect(headless.missing).toBe("origin_head");
    expect(headless.message).toContain("origin/HEAD does not resolve");
    expect(headless.message).toContain(`git -C ${noHead.clone} remote set-head origin --auto`);
    // The command it names really is the fix.
    git(noHead.clone, "remote", "set-head", "origin", "--auto");
    await expect(checkWorktreePrerequisites(serverGit(noHead.clone))).resolves.toBeUndefined();
  });

  it("refuses a work dir that does not exist", async () => {
    const r = await repo();
    expect((await prerequisiteError(join(r.root, "missing"))).missing).toBe("git_repository");
  });
});

describe.each(runners)("a session's worktree on disk, git %s", (_, options) => {
  const gitIn = (dir: string): Git => new GitRunner(options).forSession(null, dir);

  it("is found with its branch, head and base commit; absent before it is made", async () => {
    const r = await repo();
    const id = randomUUID();
    expect(await findSessionWorktree(gitIn(r.clone), id)).toBeUndefined();
    const path = worktreeAsTheCliMakesIt(r.clone, id);
    const base = git(r.clone, "rev-parse", "origin/HEAD");
    git(path, "commit", "-q", "--allow-empty", "-m", "work");
    expect(await findSessionWorktree(gitIn(r.clone), id)).toEqual({
      path,
      branch: `worktree-${id}`,
      head: git(path, "rev-parse", "HEAD"),
      baseCommit: base,
    });
  });

  it("is removed with its branch when clean, though the CLI left it locked", async () => {
    const r = await repo();
    const id = randomUUID();
    const path = worktreeAsTheCliMakesIt(r.clone, id);
    expect(await removeSessionWorktree(gitIn(r.clone), id, { force: false })).toEqual({
      outcome: "removed",
      path,
    });
    expect(existsSync(path)).toBe(false);
    expect(gitOk(r.clone, "rev-parse", "--verify", `refs/heads/worktree-${id}`)).toBe(false);
    expect(await removeSessionWorktree(gitIn(r.clone), id, { force: false })).toEqual({
      outcome: "absent",
    });
  });

  it("is kept when dirty (untracked files count), and removed with force", async () => {
    const r = await repo();
    const id = randomUUID();
    const path = worktreeAsTheCliMakesIt(r.clone, id);
    await writeFile(join(path, "notes.txt"), "unsaved\n");
    expect(await isDirty(gitIn(r.clone), path)).toBe(true);
    expect(await removeSessionWorktree(gitIn(r.clone), id, { force: false })).toEqual({
      outcome: "kept_dirty",
      path,
    });
    expect(existsSync(join(path, "notes.txt"))).toBe(true);
    expect(await removeSessionWorktree(gitIn(r.clone), id, { force: true })).toMatchObject({
      outcome: "removed",
    });
    expect(existsSync(path)).toBe(false);
    expect(gitOk(r.clone, "rev-parse", "--verify", `refs/heads/worktree-${id}`)).toBe(false);
  });

  it("is made by the bridge, for an agent that makes none, where and as the CLI makes its own, and reused", async () => {
    const r = await repo();
    const id = randomUUID();
    const path = await ensureSessionWorktree(gitIn(r.clone), id, codexPlugin.worktree);
    expect(path).toBe(join(r.clone, ".claude", "worktrees", id));
    expect(await findSessionWorktree(gitIn(r.clone), id)).toMatchObject({
      path,
      branch: `worktree-${id}`,
      baseCommit: git(r.clone, "rev-parse", "origin/HEAD"),
    });
    git(path, "commit", "-q", "--allow-empty", "-m", "the session's work");
    const head = git(path, "rev-parse", "HEAD");
    expect(await ensureSessionWorktree(gitIn(r.clone), id, codexPlugin.worktree)).toBe(path);
    expect(git(path, "rev-parse", "HEAD")).toBe(head);
    // Deleted by hand: its branch is checked out again, the session's commits kept.
    await rm(path, { recursive: true, force: true });
    expect(await ensureSessionWorktree(gitIn(r.clone), id, codexPlugin.worktree)).toBe(path);
    expect(git(path, "rev-parse", "HEAD")).toBe(head);
  });

  it("deleted by hand, is pruned and checked out again from its branch, commits kept", async () => {
    const r = await repo();
    const id = randomUUID();
    const path = worktreeAsTheCliMakesIt(r.clone, id);
    git(path, "commit", "-q", "--allow-empty", "-m", "the session's work");
    const head = git(path, "rev-parse", "HEAD");
    await rm(path, { recursive: true, force: true });
    expect(await findSessionWorktree(gitIn(r.clone), id)).toBeUndefined();

    expect(await restoreSessionWorktree(gitIn(r.clone), id)).toBe(path);
    expect(git(path, "rev-parse", "HEAD")).toBe(head);
    expect(git(path, "rev-parse", "--abbrev-ref", "HEAD")).toBe(`worktree-${id}`);
    // Present now: nothing more to restore.
    expect(await restoreSessionWorktree(gitIn(r.clone), id)).toBeUndefined();
  });

  it("is looked for in the repository alone: git's record of one elsewhere is not followed", async () => {
    const r = await repo();
    const id = randomUUID();
    // What an agent could make git record: the session's branch in another work dir.
    const elsewhere = join(r.root, "another-work-dir");
    git(r.clone, "worktree", "add", "-q", "-b", `worktree-${id}`, elsewhere, "origin/HEAD");
    await writeFile(join(elsewhere, "theirs.txt"), "another tenant's work\n");
    expect(await findSessionWorktree(gitIn(r.clone), id)).toBeUndefined();
    await expect(isDirty(gitIn(r.clone), elsewhere)).rejects.toThrow(/is not in/);
    // Removal leaves it be (git then refuses to delete a branch checked out there).
    await expect(removeSessionWorktree(gitIn(r.clone), id, { force: true })).rejects.toThrow();
    expect(existsSync(join(elsewhere, "theirs.txt"))).toBe(true);
  });

  it("stops a command the repository's config planted once git's time is up", async () => {
    const r = await repo();
    const id = randomUUID();
    const path = worktreeAsTheCliMakesIt(r.clone, id);
    git(r.clone, "config", "core.fsmonitor", "sleep 600");
    const quick = new GitRunner({ ...options, timeLimitMs: 300 }).forSession(null, r.clone);
    // Its answer comes once git's output is closed: the planted sleep is gone too.
    await expect(isDirty(quick, path)).rejects.toThrow(/stopped after 300 ms/);
  });

  it("deleted by hand, is removed from git's records with its branch", async () => {
    const r = await repo();
    const id = randomUUID();
    const path = worktreeAsTheCliMakesIt(r.clone, id);
    await rm(path, { recursive: true, force: true });
    expect(await removeSessionWorktree(gitIn(r.clone), id, { force: false })).toEqual({
      outcome: "removed",
      path,
    });
    expect(git(r.clone, "worktree", "list", "--porcelain")).not.toContain(id);
    expect(gitOk(r.clone, "rev-parse", "--verify", `refs/heads/worktree-${id}`)).toBe(false);
  });
});
