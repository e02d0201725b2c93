import type { Socket } from "node:net";
import type { Launch } from "./sandbox.js";
import { type ExitStatus, spawnProcess } from "./spawner.js";

// A short command of the server's own (the CLI's --version, git in a session's repository),
// started as the spawner starts any (in a sandbox, through its Launch) and read to its end, within
// bounds: a command a planted config makes hang or talk without end holds nothing up.

export interface Ended {
  /** Undefined when it wrote more than the bound. */
  stdout: string | undefined;
  stderr: string | undefined;
  exit: ExitStatus;
  /** It was stopped at the time limit. */
  late: boolean;
  /** With `keepHead`: stdout was cut at the bound (and the command stopped there). */
  cut?: boolean;
}

export interface Bounds {
  timeLimitMs: number;
  maxOutputBytes: number;
  /**
   * Stdout past the bound is cut there (the command stopped) and its first bytes kept, rather
   * than the whole of it dropped.
   */
  keepHead?: boolean;
}

/** Starts `launch` in `cwd` with `env` (its own variables over them), stdin closed; its end. */
export async function runToEnd(
  launch: Launch,
  cwd: string,
  env: Record<string, string>,
  bounds: Bounds,
): Promise<Ended> {
  const child = await spawnProcess(launch.bin, launch.args, {
    cwd,
    env: { ...env, ...launch.env },
    dirs: launch.dirs,
  });
  child.stdin.end();
  const stop = () => killGroup(child.pid);
  let late = false;
  const timer = setTimeout(() => {
    late = true;
    stop();
  }, bounds.timeLimitMs);
  let cut = false;
  const head = bounds.keepHead
    ? () => {
        cut = true;
        stop();
      }
    : undefined;
  const [stdout, stderr, exit] = await Promise.all([
    text(child.stdout, bounds.maxOutputBytes, stop, head),
    text(child.stderr, bounds.maxOutputBytes, stop),
    child.exited,
  ]).finally(() => clearTimeout(timer));
  return { stdout, stderr, exit, late, ...(bounds.keepHead ? { cut } : {}) };
}

/** Ends the command and all it started: in a sandbox, bwrap's end ends everything inside. */
function killGroup(pgid: number) {
  try {
    process.kill(-pgid, "SIGKILL");
  } catch {
    // Gone already.
  }
}

/**
 * A stream's text; undefined, once `stop` is called, when it exceeds `max` bytes; or, with
 * `cutHead`, its first `max` bytes once that is called.
 */
async function text(
  stream: Socket,
  max: number,
  stop: () => void,
  cutHead?: () => void,
): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > max) {
      stream.destroy();
      if (cutHead) {
        chunks.push(chunk.subarray(0, chunk.length - (size - max)));
        cutHead();
        return Buffer.concat(chunks).toString("utf8");
      }
      stop();
      return undefined;
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}
