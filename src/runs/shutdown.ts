import { withDbRetries } from "../store/retry.js";
import type { ActiveRun } from "./active-run.js";
import type { DeadInstance } from "./cluster-port.js";
import { CompletionsUnstoredError } from "./errors.js";
import type { RunParts } from "./parts.js";
import type { RunQueue } from "./queue.js";
import { reapRuns } from "./recovery.js";

/**
 * The end of this instance's runs: the server's shutdown, a lost lease, and the runs a dead
 * instance left, which this one closes.
 */
export class Shutdown {
  constructor(
    private readonly parts: RunParts,
    private readonly queue: RunQueue,
  ) {}

  /**
   * Stops taking and claiming runs, hands its queued runs back for other instances to claim (on
   * the embedded database, and those waiting for their session, they end `interrupted`), lets
   * running ones finish for up to `graceMs` (or until `hurry` is aborted), then stops them; every
   * run it keeps gets its completion before this resolves.
   */
  async shutdown(graceMs: number, hurry?: AbortSignal): Promise<void> {
    const { admission, recorder, opts } = this.parts;
    const { queued, waiting } = admission.close();
    for (const run of queued) {
      if (await this.queue.handOver(run)) admission.remove(run);
      else await this.endUnstarted(run);
    }
    for (const run of waiting) await this.endUnstarted(run);
    const all = () => Promise.all(admission.all().map((r) => r.life.left));
    let timer: NodeJS.Timeout | undefined;
    const graceOver = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, graceMs);
      // Told to hurry already (while the queued runs were handed back), or later.
      if (hurry?.aborted) resolve();
      else hurry?.addEventListener("abort", () => resolve(), { once: true });
    });
    await Promise.race([all(), graceOver]);
    clearTimeout(timer);
    // One whose outcome is known is finishing: it ends as it did.
    for (const run of admission.all()) {
      if (run.life.accepts("shutdown")) run.life.fire({ type: "shutdown" });
    }
    await all();
    const { claims } = opts.cluster;
    // No claim starts from here on; one in progress gives its run back (the admission is
    // closed), ends it (a cancel's), or fails, and is then given back below.
    await claims.close();
    // A completion the database would not take yet gets one more try.
    await recorder.flush();
    // Before the instance records its end: still owned by an instance that ended, a run would
    // never be claimed nor reaped. Failing, the instance leaves its lease to expire instead, and
    // another instance (or the next start) closes what it left.
    await withDbRetries(() => claims.giveBackFailed(), opts.dbOutageBoundMs);
    // Given up on too: an instance that recorded its end would never have them reaped.
    const unstored = recorder.unstored();
    if (unstored.length > 0) throw new CompletionsUnstoredError(unstored);
  }

  /**
   * This instance lost its lease: another one has closed its runs. Their CLIs are stopped; what
   * they write no longer reaches the runs' logs, which took their one completion already.
   */
  abandonAll(): void {
    for (const run of this.parts.admission.all()) {
      if (run.life.accepts("lease_lost")) run.life.fire({ type: "lease_lost" });
    }
  }

  /**
   * Closes the runs a dead instance left (null: those of versions before instances): their
   * process groups are killed where they can still be theirs, and each gets an `interrupted`
   * completion, which frees its session.
   */
  reap(instance: DeadInstance | null): Promise<number> {
    const { recorder, opts } = this.parts;
    const { db, logger, killGraceMs, transactionHooks } = opts;
    return reapRuns({ db, logger, killGraceMs, recorder, hooks: transactionHooks }, instance);
  }

  /**
   * The runs this instance holds whose completion is not stored: waiting, queued or running here,
   * or ended with a completion the database has not taken. What a shutdown that cannot finish
   * leaves to recovery.
   */
  unsettled(): string[] {
    const { admission, recorder } = this.parts;
    return [...new Set([...admission.all().map((r) => r.row.id), ...recorder.unstored()])];
  }

  /** A run that had not started when the server was told to stop: it ends `interrupted`. */
  private async endUnstarted(run: ActiveRun) {
    // A client's cancel ended it meanwhile, and removes it.
    if (!run.life.accepts("shutdown")) return;
    run.life.fire({ type: "shutdown" });
    await this.parts.execution.endUnstarted(run);
    this.parts.admission.remove(run);
  }
}
