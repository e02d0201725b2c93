import { errorText, type Logger } from "../log.js";
import { OnceMore } from "../once-more.js";
import {
  postRunCommand,
  type RunCommand,
  type SteerCommand,
  type SteerOutcome,
  takeCommandReply,
  takeRunCommands,
  withdrawRunCommand,
} from "../store/commands.js";
import type { Database } from "../store/db.js";
import { lastEventSeqs } from "../store/events.js";
import { getRun, OPEN_STATUSES } from "../store/runs.js";
import type { RunRow } from "../store/schema.js";
import type { Doorbell } from "./doorbell.js";
import { followElsewhere } from "./remote-follower.js";

// Commands for a run posted on an instance that does not execute it: a durable row for the owner,
// and a ring of its doorbell. The owner takes them when rung, when its LISTEN connection
// (re)connects and at each lease tick; an owner that is gone has its runs closed by the lease
// sweep. Either way the run's completion is stored, and the poster answers from it.

/**
 * Asks the run's owner to cancel or interrupt it and waits for its completion; resolves with the
 * status it ended with (undefined: the run is gone).
 */
export async function stopElsewhere(
  db: Database,
  doorbell: Doorbell,
  run: RunRow & { instanceId: string },
  kind: "cancel" | "interrupt",
): Promise<string | undefined> {
  const { seq } = await lastEventSeqs(db, run.id);
  const posted = await postRunCommand(
    db,
    { runId: run.id, kind, owner: run.instanceId },
    doorbell.rings,
  );
  if (!posted) return undefined;
  for await (const _ of followElsewhere(db, doorbell, run.id, "full", seq)) {
    // Only the end matters.
  }
  return (await getRun(db, run.id))?.status;
}

/**
 * Gives the run's owner a client's input or switch and waits for its answer: the owner's reply,
 * the run's end, or, when the owner has not taken the command within `boundMs`, the command
 * withdrawn (a command the owner took is answered: its reply, or the run's end, is waited for).
 */
export async function steerElsewhere(
  db: Database,
  doorbell: Doorbell,
  run: RunRow & { instanceId: string },
  command: SteerCommand,
  boundMs: number,
): Promise<SteerOutcome> {
  // Watched before the post: the reply's ring is heard however soon it comes.
  const watch = doorbell.watch(run.id);
  try {
    const posted = await postRunCommand(db, { ...command, owner: run.instanceId }, doorbell.rings);
    if (!posted) return { ok: false, finished: "deleted" };
    const deadline = Date.now() + boundMs;
    let withdrawable = true;
    for (;;) {
      const { seq } = await lastEventSeqs(db, run.id);
      const reply = await takeCommandReply(db, command.commandId);
      if (reply) return reply;
      const status = (await getRun(db, run.id))?.status;
      if (!status || !OPEN_STATUSES.includes(status)) {
        return { ok: false, finished: status ?? "deleted" };
      }
      const left = deadline - Date.now();
      if (left <= 0 && withdrawable) {
        if (await withdrawRunCommand(db, command.commandId)) return { ok: false, untaken: true };
        // Taken: its reply, or the run's end, comes.
        withdrawable = false;
      }
      const timeout = AbortSignal.timeout(Math.max(left, 1000));
      await watch.next(seq, timeout);
    }
  } finally {
    watch.close();
  }
}

/**
 * The owner's side: takes the commands waiting for this instance's runs and hands each to `apply`,
 * one take at a time (rings during a take lead to one more).
 */
export class CommandInbox {
  private readonly takes: OnceMore;

  constructor(opts: {
    db: Database;
    logger: Logger;
    self: () => string;
    apply: (command: RunCommand) => void;
  }) {
    this.takes = new OnceMore(async () => {
      try {
        const commands = await takeRunCommands(opts.db, opts.self());
        for (const command of commands) opts.apply(command);
      } catch (err) {
        // The next ring or lease tick looks again.
        opts.logger.warn("could not read the commands for this instance's runs", {
          error: errorText(err),
        });
      }
    });
  }

  /** Looks for commands now (or right after the take in progress). Never rejects. */
  check(): Promise<void> {
    return this.takes.run();
  }
}
