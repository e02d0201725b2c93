import { execFile } from "node:child_process";

export type ClaudeProbe = () => Promise<string>;

/**
 * Asks the CLI for its version (`claude --version`), which proves the binary exists and runs.
 * A success is remembered for `ttlMs` so that readiness checks do not spawn a process each time.
 */
export function createClaudeProbe(
  bin: string,
  env: Record<string, string>,
  ttlMs = 60_000,
): ClaudeProbe {
  let cached: { version: string; at: number } | undefined;
  return async () => {
    if (cached && Date.now() - cached.at < ttlMs) return cached.version;
    const version = await new Promise<string>((resolve, reject) => {
      execFile(bin, ["--version"], { timeout: 15_000, env }, (err, stdout) => {
        if (err) {
          const reason =
            (err as NodeJS.ErrnoException).code === "ENOENT" ? "not found" : err.message;
          reject(new Error(`claude CLI at ${bin}: ${reason}`));
        } else resolve(stdout.trim());
      });
    });
    cached = { version, at: Date.now() };
    return version;
  };
}
