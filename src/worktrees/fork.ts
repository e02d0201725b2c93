import type { Git } from "./git.js";
import {
  findSessionWorktree,
  removeSessionWorktree,
  type SessionWorktree,
  type WorktreeLayout,
  worktreeBranch,
} from "./worktree.js";

// A forked session's worktree: the branch `worktree-<fork>` made at the original's current commit,
// in the directory the agent's layout says (where the CLI's `-w <fork>` then finds and reuses it),
// holding the original's uncommitted changes as uncommitted changes of its own.
//
// All of it is git's work, run as the session's tenant like any git here (git.ts): the original's
// files are read by git through `--work-tree`, never opened by the server. The original's
// worktree, its index and its branch are left as they are: the fork's own index takes the
// original's files (`add --all` with the original's directory as the work tree), is written out in
// the fork's directory, and reset to the commit, so that what was staged or not, added or deleted
// there is a change here. Untracked files come along; ignored files (.gitignore) do not, nor what
// the original had staged as staged (it is a change in the fork's files, unstaged).

/**
 * Makes the fork's worktree from the original's as it is now; undefined when the original has no
 * worktree on disk. A failure part way leaves no branch or worktree of the fork behind.
 */
export async function forkSessionWorktree(
  git: Git,
  originalId: string,
  forkId: string,
  layout: WorktreeLayout,
): Promise<SessionWorktree | undefined> {
  const original = await findSessionWorktree(git, originalId);
  if (!original) return undefined;
  const dir = layout.directory(git.repo, forkId);
  const branch = worktreeBranch(forkId);
  try {
    await git.run([
      "worktree",
      "add",
      "--quiet",
      "--no-checkout",
      "-b",
      branch,
      dir,
      original.head,
    ]);
    await git.run(["read-tree", "HEAD"], dir);
    await git.run([`--work-tree=${original.path}`, "add", "--all"], dir);
    await git.run(["checkout-index", "--all"], dir);
    await git.run(["reset", "--quiet"], dir);
    const made = await findSessionWorktree(git, forkId);
    if (!made) throw new Error(`the fork's worktree at ${dir} is not there after it was made`);
    return made;
  } catch (err) {
    await removeSessionWorktree(git, forkId, { force: true }).catch(() => {});
    throw err;
  }
}
