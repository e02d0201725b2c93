import { execFile } from "node:child_process";
import { commandAs, type RunAs } from "../process/agent-user.js";

// Plain `git` as a subprocess: argument arrays, never a shell; the output of one command at a time.

/** Who runs git, when not the server's own user. */
interface GitIdentity {
  runAs: RunAs;
  /** The complete environment: none of the server's secrets. */
  env: Record<string, string>;
}

let identity: GitIdentity | undefined;

/**
 * Git refuses a repository another user owns, and a worktree is the tenant's (its agent's git
 * made it), in a repository of the agent user's: git as the agent user is told to work there.
 */
const ANY_OWNER = {
  GIT_CONFIG_COUNT: "1",
  GIT_CONFIG_KEY_0: "safe.directory",
  GIT_CONFIG_VALUE_0: "*",
};

/**
 * With agents running as another user (AGENT_BRIDGE_AGENT_USER), git runs as that user too: the
 * repositories it works in are the agents' to write, and a repository's config can make git run
 * commands (core.fsmonitor, hooks), which must never run as the server. Set at start-up.
 */
export function runGitAs(who: GitIdentity | undefined) {
  identity = who;
}

export class GitError extends Error {
  constructor(
    readonly args: readonly string[],
    readonly code: number | null,
    readonly stderr: string,
  ) {
    super(`git ${args.join(" ")} failed (${code ?? "signal"}): ${stderr.trim() || "no output"}`);
  }
}

/** Runs `git <args>` in `cwd`; resolves with stdout, rejects with a GitError. */
export function git(cwd: string, args: readonly string[]): Promise<string> {
  const [file, argv] = identity ? commandAs(identity.runAs, "git", [...args]) : ["git", args];
  return new Promise((resolve, reject) => {
    execFile(
      file,
      argv,
      // Only local commands are run (no fetch or push), so nothing can wait for a credential.
      {
        cwd,
        encoding: "utf8",
        maxBuffer: 16 * 1024 * 1024,
        ...(identity ? { env: { ...identity.env, ...ANY_OWNER } } : {}),
      },
      (err, stdout, stderr) => {
        if (!err) return resolve(stdout);
        const code = typeof err.code === "number" ? err.code : null;
        reject(new GitError(args, code, stderr || err.message));
      },
    );
  });
}

/** stdout trimmed, or undefined when git exits non-zero (a "no" answer, not a failure). */
export async function gitMaybe(cwd: string, args: readonly string[]): Promise<string | undefined> {
  try {
    return (await git(cwd, args)).trim();
  } catch (err) {
    if (err instanceof GitError) return undefined;
    throw err;
  }
}
