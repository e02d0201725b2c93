import { commandAs, type RunAs } from "./agent-user.js";
import { runToEnd } from "./run-to-end.js";
import type { Launch, Sandbox } from "./sandbox.js";

export type VersionProbe = () => Promise<string>;

/** Where the probe runs the CLI: as the runs do. */
export interface ProbeAs {
  /** The agents' user. */
  runAs?: RunAs;
  /** The runs' sandbox: a CLI the agents reach only inside one is found there. */
  sandbox?: Sandbox;
}

/** How long the CLI may take to say its version, and how much it may say. */
const PROBE_BOUNDS = { timeLimitMs: 15_000, maxOutputBytes: 1024 * 1024 };

/**
 * Asks an agent's CLI for its version (`<bin> --version`), started as its runs are (as the
 * agents' user, in a sandbox of its own), which proves the binary exists and runs for them. A
 * success is remembered for `ttlMs` so that readiness checks do not spawn a process each time.
 */
export function createVersionProbe(
  name: string,
  bin: string,
  env: Record<string, string>,
  as: ProbeAs = {},
  ttlMs = 60_000,
): VersionProbe {
  let cached: { version: string; at: number } | undefined;
  return async () => {
    if (cached && Date.now() - cached.at < ttlMs) return cached.version;
    let version: string;
    try {
      version = await run(await launch(bin, env, as), env);
    } catch (err) {
      const reason =
        (err as NodeJS.ErrnoException).code === "ENOENT" ? "not found" : (err as Error).message;
      throw new Error(`${name} CLI at ${bin}: ${reason}`);
    }
    cached = { version, at: Date.now() };
    return version;
  };
}

function launch(bin: string, env: Record<string, string>, as: ProbeAs): Promise<Launch> | Launch {
  const args = ["--version"];
  if (as.sandbox) {
    // Working nowhere in particular: the system, read-only.
    return as.sandbox.command({
      bin,
      args,
      cwd: "/",
      env,
      ...(as.runAs ? { runAs: as.runAs } : {}),
      reach: { workDirReadOnly: true },
    });
  }
  const [file, argv] = as.runAs ? commandAs(as.runAs, bin, args) : [bin, args];
  return { bin: file, args: argv, dirs: [], env: {} };
}

/** The command's stdout, trimmed, once it exits 0; else why not. */
async function run(command: Launch, env: Record<string, string>): Promise<string> {
  const { stdout, stderr, exit, late } = await runToEnd(command, "/", env, PROBE_BOUNDS);
  if (late) throw new Error(`no answer within ${PROBE_BOUNDS.timeLimitMs / 1000}s`);
  if (exit.code === 0 && stdout !== undefined) return stdout.trim();
  const how =
    exit.code === null ? `killed by ${exit.signal ?? "a signal"}` : `exit code ${exit.code}`;
  const last = stderr?.trim().split("\n").at(-1);
  throw new Error(last ? `${how}: ${last}` : how);
}
