import { execFile } from "node:child_process";
import { commandAs, type RunAs } from "./agent-user.js";

export type VersionProbe = () => Promise<string>;

/**
 * Asks an agent's CLI for its version (`<bin> --version`), which proves the binary exists and
 * runs (as the agents' user, when given). A success is remembered for `ttlMs` so that readiness
 * checks do not spawn a process each time.
 */
export function createVersionProbe(
  name: string,
  bin: string,
  env: Record<string, string>,
  runAs?: RunAs,
  ttlMs = 60_000,
): VersionProbe {
  const [file, args] = runAs ? commandAs(runAs, bin, ["--version"]) : [bin, ["--version"]];
  let cached: { version: string; at: number } | undefined;
  return async () => {
    if (cached && Date.now() - cached.at < ttlMs) return cached.version;
    const version = await new Promise<string>((resolve, reject) => {
      execFile(file, args, { timeout: 15_000, env }, (err, stdout) => {
        if (err) {
          const reason =
            (err as NodeJS.ErrnoException).code === "ENOENT" ? "not found" : err.message;
          reject(new Error(`${name} CLI at ${bin}: ${reason}`));
        } else resolve(stdout.trim());
      });
    });
    cached = { version, at: Date.now() };
    return version;
  };
}
