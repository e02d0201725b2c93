import type { Launch } from "./sandbox.js";
import { type ExitStatus, runProcess } from "./spawner.js";

// A short command of the server's own (the CLI's --version, git in a session's repository),
// run by the spawner to its end (in a sandbox, through its Launch), its output sent back within
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
  const { maxOutputBytes: maxBytes, keepHead } = bounds;
  const ran = await runProcess(
    launch.bin,
    launch.args,
    { cwd, env: { ...env, ...launch.env }, dirs: launch.dirs },
    {
      timeLimitMs: bounds.timeLimitMs,
      stdout: { maxBytes, over: keepHead ? "head" : "stop" },
      stderr: { maxBytes, over: "stop" },
    },
  );
  return {
    stdout: ran.stdout?.toString("utf8"),
    stderr: ran.stderr?.toString("utf8"),
    exit: ran.exit,
    late: ran.late,
    ...(keepHead ? { cut: ran.cut } : {}),
  };
}
