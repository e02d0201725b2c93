import { errorText } from "../log.js";
import { ANONYMOUS_ADMIN } from "../principal.js";
import { uniqueViolation } from "../store/errors.js";
import { withDbRetries } from "../store/retry.js";
import { promoteWaitingRun } from "../store/run-admission.js";
import { claimQueuedRun, claimStrandedRuns, releaseRun, ringForWork } from "../store/run-claims.js";
import type { RunRow } from "../store/schema.js";
import { getSession } from "../store/sessions.js";
import { ActiveRun } from "./active-run.js";
import { SessionGoneError } from "./errors.js";
import { fromHandover, toHandover } from "./handover.js";
import { NO_RUN_OPTIONS } from "./message.js";
import type { RunParts } from "./parts.js";
import { Puller } from "./puller.js";

// This instance's side of the database's queue of runs: pulling the runs no instance owns when a
// slot is free here, promoting a run waiting here for its session (and handing it over when
// another instance is to run it), handing back queued runs, and closing those whose host is gone.
// Taking runs in the database is a claim (src/runs/cluster-port.ts, QueueClaims).

export class RunQueue {
  private readonly puller: Puller;

  constructor(
    private readonly parts: RunParts,
    /** This instance pulled the run: those following it from the stored log switch to memory. */
    private readonly adopted: (runId: string) => void,
  ) {
    this.puller = new Puller({ logger: parts.opts.logger, pullOne: () => this.pullOne() });
  }

  /**
   * Pulls queued runs that no instance owns while this one has free slots; nothing on the
   * embedded database, where every run is this process's. Resolves when this look is done (it
   * never rejects: a failed claim is logged, and the next ring looks again).
   */
  pull(): Promise<void> {
    return this.parts.opts.cluster.shared ? this.puller.check() : Promise.resolve();
  }

  /**
   * A waiting run's turn: it becomes the session's queued run in the store, if no other is. On
   * Postgres it joins the database's queue (`gone` from here) when it cannot start here at once:
   * pinned to another host, or no slot free here (queued in this instance's memory, it would go
   * before the database's queue, out of its turn).
   */
  async promote(run: ActiveRun): Promise<"promoted" | "blocked" | "gone"> {
    const { admission, opts } = this.parts;
    let promoted: Awaited<ReturnType<typeof promoteWaitingRun>>;
    try {
      promoted = await promoteWaitingRun(opts.db, run.id);
    } catch (err) {
      // Another process still has a run on the session: keep waiting (the poll looks again).
      if (uniqueViolation(err) === "runs_one_active_per_session") return "blocked";
      throw err;
    }
    // A run of the session written before it waits on another instance: that one goes first.
    if (promoted === "behind") return "blocked";
    // The row is gone (its session was deleted): nothing to run.
    if (!promoted) {
      run.life.fire({ type: "vanish" });
      return "gone";
    }
    run.promote(promoted.run, promoted.resume);
    // Its session's worktree is on another host's disk: that host's instances run it.
    const { pinnedHost } = promoted.run;
    const elsewhere = pinnedHost !== null && pinnedHost !== opts.host;
    const queued = opts.cluster.shared && !admission.hasFreeSlot();
    if ((elsewhere || queued) && (await this.handOver(run))) {
      // A pull in progress here may have looked before it was queued: it looks again after.
      if (!elsewhere) void this.pull();
      return "gone";
    }
    return "promoted";
  }

  /**
   * Gives a queued run back to the database's queue for another instance to claim, with what its
   * message set for it; false on the embedded database, or when that failed.
   */
  async handOver(run: ActiveRun): Promise<boolean> {
    const { db, cluster, instanceId, logger } = this.parts.opts;
    if (!cluster.shared) return false;
    try {
      const handover = toHandover({ options: run.options, resumeAt: run.resumeAt });
      if (!(await releaseRun(db, run.id, instanceId(), handover))) return false;
      run.life.fire({ type: "hand_over" });
      run.log.handOver();
      if (cluster.rings) await ringForWork(db, run.row.pinnedHost);
      logger.info("handed a queued run over to the other instances", { run_id: run.id });
      return true;
    } catch (err) {
      logger.error("could not hand a queued run over", { run_id: run.id, error: errorText(err) });
      return false;
    }
  }

  /** A run this instance claimed, from its rows, as its admission would have made it. */
  async runFromRow(claimed: { run: RunRow; resume: boolean }): Promise<ActiveRun> {
    const { db, transactionHooks } = this.parts.opts;
    const { run: row, resume } = claimed;
    const session = await getSession(db, row.sessionId, ANONYMOUS_ADMIN);
    // The run's row is deleted with its session: a claimed run always has one.
    if (!session) throw new SessionGoneError(row.sessionId);
    const { options, resumeAt } = row.handover
      ? fromHandover(row.handover)
      : { options: NO_RUN_OPTIONS, resumeAt: null };
    const log = this.parts.logFor(row.id);
    // Which hooks joined it is not known here: each hook's part keys on the run (as in recovery).
    return new ActiveRun(row, false, {
      session,
      log,
      resume,
      hooks: transactionHooks,
      options,
      resumeAt,
    });
  }

  /**
   * Ends the queued runs pinned to a host where no instance is alive any more (the last one
   * stopped or died after they were written): `interrupted`, as the runs of an instance that is
   * gone. Asked at each lease renewal.
   */
  async closeStranded(): Promise<void> {
    const { execution, opts } = this.parts;
    const { db, logger, cluster } = opts;
    if (!cluster.shared || cluster.claims.closed) return;
    // Ended within the claim, as a cancel's claimed run is.
    await cluster.claims.claim(async (claim) => {
      const rows = await claimStrandedRuns(db, claim);
      const stranded = await Promise.all(
        rows.map((row) => this.runFromRow({ run: row, resume: false })),
      );
      for (const run of stranded) {
        const { pinnedHost } = run.row;
        run.life.fire({
          type: "strand",
          reason: `no instance of host ${pinnedHost}, which holds the session's worktree, is alive to run it`,
        });
        await execution.endUnstarted(run);
        logger.warn("closed a queued run whose worktree's host is gone", {
          run_id: run.id,
          host: pinnedHost,
        });
      }
    });
  }

  /**
   * Claims the queued run no instance owns whose turn it is, of those this host may run
   * (claimQueuedRun), when a slot is free here, and starts it; false when there is no slot or no
   * such run.
   */
  private async pullOne(): Promise<boolean> {
    const { admission, opts } = this.parts;
    const { db, host, cluster } = opts;
    await cluster.claims.giveBackFailed();
    if (!admission.hasFreeSlot()) return false;
    const freePlace = admission.holdPlace();
    try {
      return await cluster.claims.claim(async (claim) => {
        const claimed = await claimQueuedRun(db, claim, host);
        if (!claimed) return false;
        // Through an outage, as a run's writes are: a claimed run left neither started nor given
        // back would stay this instance's, queued, until the next claim gives it back.
        const retrying = <T>(task: () => Promise<T>) => withDbRetries(task, opts.dbOutageBoundMs);
        const giveBack = () => retrying(() => cluster.claims.giveBack([claim.token]));
        let run: ActiveRun;
        try {
          run = await retrying(() => this.runFromRow(claimed));
        } catch (err) {
          // Not startable here now: back to the queue, for this or another instance.
          await giveBack();
          throw err;
        }
        // Told to stop while it was claiming: the run is another instance's to take.
        if (!admission.open) {
          await giveBack();
          return false;
        }
        admission.add(run, false);
        this.adopted(run.id);
        return true;
      });
    } finally {
      freePlace();
    }
  }
}
