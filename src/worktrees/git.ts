import { execFile } from "node:child_process";

// Plain `git` as a subprocess: argument arrays, never a shell; the output of one command at a time.

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
  return new Promise((resolve, reject) => {
    execFile(
      "git",
      args,
      // Only local commands are run (no fetch or push), so nothing can wait for a credential.
      { cwd, encoding: "utf8", maxBuffer: 16 * 1024 * 1024 },
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
