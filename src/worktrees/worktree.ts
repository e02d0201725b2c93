import { existsSync } from "node:fs";
import path from "node:path";
import type { Git } from "./git.js";

// A session's git worktree: on the branch `worktree-<id>`, in the directory its agent's layout
// says (as the claude CLI makes it with `-w <session id>`), made off origin/HEAD on the first run
// and reused on `--resume`. Everything here asks git and the file system, never assumes.
//
// Observed with the CLI (2.1.328): it locks the worktree ("claude session <id> (pid …)") and
// leaves the lock after it exits, so removal and prune unlock first; and when the directory is
// missing it recreates the worktree with the branch reset to origin/HEAD, losing the session's
// commits, hence `restoreSessionWorktree` before a run.

export const worktreeBranch = (sessionId: string) => `worktree-${sessionId}`;

export interface GitWorktree {
  path: string;
  head: string | null;
  /** Full ref, e.g. `refs/heads/main`; null when detached. */
  branch: string | null;
  locked: boolean;
}

/** `git worktree list --porcelain`, parsed. */
export async function listWorktrees(git: Git): Promise<GitWorktree[]> {
  const out = await git.run(["worktree", "list", "--porcelain"]);
  const list: GitWorktree[] = [];
  let current: GitWorktree | undefined;
  for (const line of out.split("\n")) {
    const space = line.indexOf(" ");
    const key = space < 0 ? line : line.slice(0, space);
    const value = space < 0 ? "" : line.slice(space + 1);
    if (key === "worktree") {
      current = { path: value, head: null, branch: null, locked: false };
      list.push(current);
    } else if (current && key === "HEAD") current.head = value;
    else if (current && key === "branch") current.branch = value;
    else if (current && key === "locked") current.locked = true;
  }
  return list;
}

export interface SessionWorktree {
  path: string;
  branch: string;
  head: string;
  /** The commit the branch was made from, when git still knows it. */
  baseCommit: string | null;
}

/**
 * The worktree git has registered for the session's branch (its directory may be gone). Only one
 * in the repository, where the CLI makes it: git's record of where a worktree is can be changed
 * by the agent, and must not send the server's git into another work dir.
 */
async function registeredWorktree(git: Git, sessionId: string) {
  const ref = `refs/heads/${worktreeBranch(sessionId)}`;
  return (await listWorktrees(git)).find((w) => w.branch === ref && git.holds(w.path));
}

const hasCheckout = (dir: string) => existsSync(path.join(dir, ".git"));

/**
 * The session's worktree when it is there: registered with git on `worktree-<id>` and its
 * directory a checkout on disk. Undefined otherwise.
 */
export async function findSessionWorktree(
  git: Git,
  sessionId: string,
): Promise<SessionWorktree | undefined> {
  const entry = await registeredWorktree(git, sessionId);
  if (!entry?.head || !hasCheckout(entry.path)) return undefined;
  const branch = worktreeBranch(sessionId);
  return {
    path: entry.path,
    branch,
    head: entry.head,
    baseCommit: await baseCommit(git, branch),
  };
}

/**
 * Where the branch started: its reflog's first entry ("branch: Created from <sha>"), else the
 * merge base with origin/HEAD (reflogs expire).
 */
async function baseCommit(git: Git, branch: string): Promise<string | null> {
  const reflog = await git.maybe(["reflog", "show", "--format=%H %gs", `refs/heads/${branch}`]);
  const first = reflog?.split("\n").at(-1);
  const created = first?.match(/^([0-9a-f]{40,64}) branch: Created from/);
  if (created?.[1]) return created[1];
  return (await git.maybe(["merge-base", "origin/HEAD", branch])) || null;
}

/** Uncommitted changes, untracked files included (ignored files are not). */
export async function isDirty(git: Git, worktreePath: string): Promise<boolean> {
  return (await git.run(["status", "--porcelain"], worktreePath)).trim() !== "";
}

async function branchExists(git: Git, branch: string): Promise<boolean> {
  return (
    (await git.maybe(["rev-parse", "--verify", "--quiet", `refs/heads/${branch}`])) !== undefined
  );
}

export type RemoveOutcome =
  | { outcome: "removed"; path: string | null }
  | { outcome: "kept_dirty"; path: string }
  | { outcome: "absent" };

/**
 * `git worktree remove` then `git branch -D worktree-<id>`. A worktree with uncommitted changes
 * is kept unless `force`; a directory already gone is pruned from git's records.
 */
export async function removeSessionWorktree(
  git: Git,
  sessionId: string,
  opts: { force: boolean },
): Promise<RemoveOutcome> {
  const entry = await registeredWorktree(git, sessionId);
  const branch = worktreeBranch(sessionId);
  if (entry) {
    // The CLI leaves its lock behind, and git refuses to remove or prune a locked worktree.
    await git.maybe(["worktree", "unlock", entry.path]);
    if (hasCheckout(entry.path)) {
      if (!opts.force && (await isDirty(git, entry.path))) {
        return { outcome: "kept_dirty", path: entry.path };
      }
      await git.run(["worktree", "remove", ...(opts.force ? ["--force"] : []), entry.path]);
    } else {
      await git.run(["worktree", "prune"]);
    }
  }
  const hadBranch = await branchExists(git, branch);
  if (hadBranch) await git.run(["branch", "-D", branch]);
  if (!entry && !hadBranch) return { outcome: "absent" };
  return { outcome: "removed", path: entry?.path ?? null };
}

/**
 * Before a run: when the session's worktree directory was deleted by hand, prunes git's record of
 * it and checks the existing branch out again at the same place, so that the CLI reuses the
 * branch (with the session's commits) instead of resetting it. Returns the restored path.
 */
export async function restoreSessionWorktree(
  git: Git,
  sessionId: string,
): Promise<string | undefined> {
  const entry = await registeredWorktree(git, sessionId);
  if (!entry || hasCheckout(entry.path)) return undefined;
  await git.maybe(["worktree", "unlock", entry.path]);
  await git.run(["worktree", "prune"]);
  const branch = worktreeBranch(sessionId);
  if (!(await branchExists(git, branch))) return undefined;
  await git.run(["worktree", "add", entry.path, branch]);
  return entry.path;
}

/**
 * Where an agent keeps a session's worktree (its plugin says): the directory is the agent's; the
 * branch is always `worktree-<id>`, which is how inspection, the sweep and removal find it.
 */
export interface WorktreeLayout {
  /** The session's worktree directory in the repository `repo`. */
  directory(repo: string, sessionId: string): string;
}

/**
 * For an agent that does not make worktrees itself: the session's worktree, made where its
 * `layout` says on the first run, off origin/HEAD, on the branch every session's worktree has (so
 * that inspection, the sweep and removal treat it as any other), and reused after. Returns its path.
 */
export async function ensureSessionWorktree(
  git: Git,
  sessionId: string,
  layout: WorktreeLayout,
): Promise<string> {
  const found = await findSessionWorktree(git, sessionId);
  if (found) return found.path;
  const restored = await restoreSessionWorktree(git, sessionId);
  if (restored) return restored;
  const dir = layout.directory(git.repo, sessionId);
  await git.run(["worktree", "add", "-b", worktreeBranch(sessionId), dir, "origin/HEAD"]);
  return dir;
}
