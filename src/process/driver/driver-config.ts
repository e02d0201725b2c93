import type { Logger } from "../../log.js";
import type { RunExchange } from "../../telemetry/tracing.js";
import type { RunLimits } from "../run-limits.js";
import type { Sandbox } from "../sandbox.js";

// How the driver (./drive.ts) runs a CLI: its limits, its sandbox and cgroups, and what it tells
// its caller.

export interface DriverConfig {
  /** Wall-clock limit of a run; 0 disables it. */
  timeoutMs: number;
  /** Longest time without any output (stdout or stderr) before the run counts as stalled; 0 disables it. */
  idleTimeoutMs: number;
  /** Longest stdout line in bytes; longer lines are dropped. */
  maxLineBytes: number;
  /** How much of stderr is kept for error messages. */
  stderrTailBytes: number;
  /**
   * Time between SIGTERM and SIGKILL, allowed for a clean exit after the outcome, and for the
   * outcome after an interrupt at a timeout or a stall.
   */
  killGraceMs: number;
  logger?: Logger;
  /** Called once the child runs, with its process group id (to clean up after a crash). */
  onSpawn?: (pgid: number) => void;
  /** The bridge's run: its id is added to the child's OTEL_RESOURCE_ATTRIBUTES. */
  runId?: string;
  /** Sees each stdout line as framed (the debug capture). */
  onRawLine?: (line: string) => void;
  /** Sees each line both ways, with the events of each stdout line (spans per event). */
  exchange?: RunExchange;
  /** Set: each CLI runs in a sandbox of its own (src/process/sandbox.ts). */
  sandbox?: Sandbox;
  /** Set: each CLI runs in cgroups of its own, with their memory and process limits. */
  limits?: RunLimits;
}

/** Defaults for callers building a DriverConfig. */
export const DRIVER_DEFAULTS = {
  maxLineBytes: 16 * 1024 * 1024,
  stderrTailBytes: 64 * 1024,
  killGraceMs: 5000,
} as const;
