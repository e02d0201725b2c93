import type { Git } from "./git.js";

// What worktree mode needs of the work dir: the CLI makes each worktree off origin/HEAD.

export type MissingPrerequisite = "git_repository" | "origin_remote" | "origin_head";

export class WorktreePrerequisiteError extends Error {
  constructor(
    readonly missing: MissingPrerequisite,
    readonly workDir: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Throws a WorktreePrerequisiteError naming the first thing missing in `git`'s repository (the
 * work dir) and the command to fix it.
 */
export async function checkWorktreePrerequisites(git: Git): Promise<void> {
  const workDir = git.repo;
  const inside = await git.maybe(["rev-parse", "--is-inside-work-tree"]);
  if (inside !== "true") {
    throw new WorktreePrerequisiteError(
      "git_repository",
      workDir,
      `${workDir} is not a git repository; clone one there with \`git clone <url> ${workDir}\``,
    );
  }
  if ((await git.maybe(["remote", "get-url", "origin"])) === undefined) {
    throw new WorktreePrerequisiteError(
      "origin_remote",
      workDir,
      `the git repository at ${workDir} has no "origin" remote; add it with \`git -C ${workDir} remote add origin <url>\`, then \`git -C ${workDir} fetch origin && git -C ${workDir} remote set-head origin --auto\``,
    );
  }
  const head = await git.maybe(["rev-parse", "--verify", "--quiet", "origin/HEAD^{commit}"]);
  if (head === undefined) {
    throw new WorktreePrerequisiteError(
      "origin_head",
      workDir,
      `origin/HEAD does not resolve in ${workDir} (worktrees are made off it); set it with \`git -C ${workDir} remote set-head origin --auto\``,
    );
  }
}
