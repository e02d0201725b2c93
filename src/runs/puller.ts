import { errorText, type Logger } from "../log.js";
import { OnceMore } from "../once-more.js";

// Queued runs that no instance owns (written by an instance with no free slot, or handed over by
// one with none when a run waiting there for its session got its turn; pinned to a worktree's
// host; or handed back by one shutting down) are pulled by an instance with a free slot:
// `pullOne` claims the one whose turn it is of those this host may run (the key running the
// fewest runs first; FOR UPDATE SKIP LOCKED, src/store/run-claims.ts) and starts it here. Looked for
// when the doorbell rings for work (a NOTIFY when such a run is written), at each lease tick, and
// when one of this instance's runs ends.

export class Puller {
  private readonly pulls: OnceMore;

  constructor(opts: {
    logger: Logger;
    /** Claims and starts one run if a slot is free and one waits; false otherwise. */
    pullOne: () => Promise<boolean>;
  }) {
    this.pulls = new OnceMore(async () => {
      try {
        while (await opts.pullOne()) {
          // One more: a slot may still be free.
        }
      } catch (err) {
        // The next ring or lease tick looks again.
        opts.logger.warn("could not claim a queued run", { error: errorText(err) });
      }
    });
  }

  /** Pulls runs while slots are free and runs wait (or right after the pull in progress). */
  check(): Promise<void> {
    return this.pulls.run();
  }
}
