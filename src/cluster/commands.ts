import { errorText, type Logger } from "../log.js";
import { OnceMore } from "../once-more.js";
import { postRunCommand, type RunCommand, takeRunCommands } from "../store/commands.js";
import type { Database } from "../store/db.js";
import { lastEventSeqs } from "../store/events.js";
import { getRun } from "../store/runs.js";
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
