import { execFileSync } from "node:child_process";
import { mkdtemp, realpath, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

// Real git repositories in a temp dir for the worktree tests: a bare `origin` and a clone of it
// whose origin/HEAD resolves, as worktree mode needs.

const IDENTITY = [
  "-c",
  "user.email=test@agent-bridge.invalid",
  "-c",
  "user.name=agent-bridge test",
];

/** `git <args>` in `cwd`, trimmed stdout; throws on a non-zero exit. */
export function git(cwd: string, ...args: string[]): string {
  return execFileSync("git", [...IDENTITY, ...args], {
    cwd,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
  }).trim();
}

/** Whether `git <args>` succeeds in `cwd`. */
export function gitOk(cwd: string, ...args: string[]): boolean {
  try {
    git(cwd, ...args);
    return true;
  } catch {
    return false;
  }
}

export interface TestRepo {
  /** The temp dir holding everything. */
  root: string;
  /** The clone the service works in. */
  clone: string;
  origin: string;
  cleanup(): Promise<void>;
}

export type RepoShape =
  /** A clone of a bare origin with one commit and origin/HEAD set. */
  | "complete"
  /** A repository with a commit and no remote. */
  | "no-origin"
  /** A clone whose origin/HEAD is not set. */
  | "no-origin-head"
  /** A plain directory. */
  | "not-a-repo";

/** `parent`: where the temp dir is made; the system's temp dir by default. */
export async function makeRepo(
  shape: RepoShape = "complete",
  parent: string = tmpdir(),
): Promise<TestRepo> {
  const root = await realpath(await mkdtemp(join(parent, "bridge-repo-")));
  const origin = join(root, "origin.git");
  const clone = join(root, "clone");
  const cleanup = () => rm(root, { recursive: true, force: true });
  if (shape === "not-a-repo") {
    execFileSync("mkdir", [clone]);
    return { root, clone, origin, cleanup };
  }
  if (shape === "no-origin") {
    git(root, "init", "-q", "-b", "main", clone);
  } else {
    git(root, "init", "-q", "--bare", "-b", "main", origin);
    git(root, "clone", "-q", origin, clone);
  }
  await writeFile(join(clone, "README.md"), "# test repository\n");
  // The worktrees the CLI makes live under .claude/; ignored, so that the clone stays clean.
  await writeFile(join(clone, ".gitignore"), ".claude/\n");
  git(clone, "add", ".");
  git(clone, "commit", "-q", "-m", "initial");
  if (shape !== "no-origin") {
    git(clone, "push", "-q", "origin", "main");
    git(clone, "remote", "set-head", "origin", "--auto");
    if (shape === "no-origin-head") git(clone, "remote", "set-head", "origin", "-d");
  }
  return { root, clone, origin, cleanup };
}
