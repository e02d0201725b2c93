import { execFile } from "node:child_process";
import { commandAs, type RunAs } from "../../process/agent-user.js";

export type ClaudeProbe = () => Promise<string>;

/**
 * Asks the CLI for its version (`claude --version`), which proves the binary exists and runs.
 * A success is remembered for `ttlMs` so that readiness checks do not spawn a process each time.
 */
export function createClaudeProbe(
  bin: string,
  env: Record<string, string>,
  runAs?: RunAs,
  ttlMs = 60_000,
): ClaudeProbe {
  const [file, args] = runAs ? commandAs(runAs, bin, ["--version"]) : [bin, ["--version"]];
  let cached: { version: string; at: number } | undefined;
  return async () => {
    if (cached && Date.now() - cached.at < ttlMs) return cached.version;
    const version = await new Promise<string>((resolve, reject) => {
      execFile(file, args, { timeout: 15_000, env }, (err, stdout) => {
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
