import type { RunStatus } from "../client/index.js";

// Exit codes of `agent-bridge`, documented in docs/cli.md: a CI step can tell a run that failed
// from one that was cancelled or timed out, and both from a command that could not be done.

export const EXIT = {
  /** The command worked; for `send` and `runs events --follow`, the run succeeded. */
  ok: 0,
  /** The command could not be done: the server said no (its problem is shown), or is unreachable. */
  error: 1,
  /** Bad usage: unknown command or option, missing argument. */
  usage: 2,
  /** The run failed (the agent or the CLI reported an error). */
  failed: 3,
  cancelled: 4,
  timed_out: 5,
  /** The server stopped while the run was going (it was closed at the next start). */
  interrupted: 6,
  /** Ctrl-C: detached from a run that goes on on the server. */
  detached: 130,
} as const;

/** Thrown by a command to end with this exit code (after it has printed what it had to). */
export class Exit extends Error {
  constructor(readonly code: number) {
    super(`exit ${code}`);
  }
}

export function exitCodeOf(status: RunStatus): number {
  switch (status) {
    case "succeeded":
      return EXIT.ok;
    case "failed":
      return EXIT.failed;
    case "cancelled":
      return EXIT.cancelled;
    case "timed_out":
      return EXIT.timed_out;
    case "interrupted":
      return EXIT.interrupted;
    // Not finished yet: only `--async` sees these, and it has nothing to report.
    case "queued":
    case "running":
    case "awaiting_approval":
      return EXIT.ok;
  }
}
