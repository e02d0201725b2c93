import { errorText } from "../log.js";
import type { RunCommand, SteerCommand } from "../store/commands.js";
import { claimRun } from "../store/run-claims.js";
import { getRun, OPEN_STATUSES, openRunsOf } from "../store/runs.js";
import type { RunRow } from "../store/schema.js";
import type { ActiveRun } from "./active-run.js";
import type { ClientReply } from "./approvals.js";
import { RunFinishedError } from "./errors.js";
import type { RunParts } from "./parts.js";
import type { RunQueue } from "./queue.js";

/**
 * How long a cancelled run's CLI has to end its turn, once asked, before its group is killed: a
 * cancel is to stop the run now, and a CLI that answers ends its turn well within it.
 */
const CANCEL_GRACE_MS = 2000;

/**
 * Stopping runs at a client's request (cancel, interrupt, a session's deletion), here or, for a
 * run another instance executes, there by a command; and the commands other instances post for
 * this one's runs.
 */
export class Stopping {
  constructor(
    private readonly parts: RunParts,
    private readonly queue: RunQueue,
  ) {}

  /**
   * Stops a queued or running run; it ends `cancelled` with its completion event. A running run's
   * CLI is asked to end its turn first, so that what it spent is counted, and its process group is
   * killed when it has not within CANCEL_GRACE_MS. A run another instance executes is cancelled
   * by that one (src/cluster/commands.ts); this resolves once its completion is stored.
   */
  cancel(runId: string): Promise<void> {
    return this.stop(runId, "cancel", CANCEL_GRACE_MS);
  }

  /**
   * Asks a running run's CLI to end its turn (its usage counted, its conversation intact for the
   * next message), and stops it as a cancel does when it has not ended within the kill grace; a
   * run not started yet is cancelled. Either way it ends `cancelled`.
   */
  interrupt(runId: string): Promise<void> {
    return this.stop(runId, "interrupt", this.parts.opts.killGraceMs);
  }

  /**
   * Deletes a session in its admission order: no message is admitted meanwhile or after, its
   * waiting and active runs are cancelled (their CLIs gone) before `remove` deletes what is left,
   * so that no run outlives the rows it writes to, nor makes a worktree again after `remove`.
   * Runs other instances execute are cancelled there, and their completions waited for.
   */
  deleteSession<T>(sessionId: string, remove: () => Promise<T>): Promise<T> {
    const { admission, opts } = this.parts;
    return admission.whileDeleting(sessionId, async () => {
      for (const run of admission.waitingFor(sessionId)) await this.cancel(run.id);
      // Those waiting on other instances too, before the active run ends and frees the session.
      for (const row of await openRunsOf(opts.db, sessionId)) {
        if (row.status === "waiting") await this.cancel(row.id).catch(() => {});
      }
      for (const run of admission.runsOf(sessionId)) {
        // A run whose outcome is already known refuses the cancel: wait for its end all the same.
        await this.cancel(run.id).catch(() => {});
        await run.life.left;
      }
      for (const row of await openRunsOf(opts.db, sessionId)) {
        // Ended meanwhile, or this instance's (a refusal of the cancel): nothing to wait for.
        await this.cancel(row.id).catch(() => {});
      }
      return await remove();
    });
  }

  /** Carries out a command another instance posted for a run of this one (steering's aside). */
  apply(command: Exclude<RunCommand, SteerCommand>): void {
    const done =
      command.kind === "answer"
        ? this.parts.approvals.answered(command.runId, command.requestId)
        : command.kind === "interrupt"
          ? this.interrupt(command.runId)
          : this.cancel(command.runId);
    done.catch((err) =>
      this.parts.opts.logger.info(
        `a${command.kind === "answer" ? "n" : ""} ${command.kind} from another instance found the run ending already`,
        {
          run_id: command.runId,
          error: errorText(err),
        },
      ),
    );
  }

  /**
   * Records a client's answer to a permission request of the run, with the API key that gave it,
   * and gives it to the CLI: here, or, for a run another instance executes, there (a command, as
   * for a cancel).
   */
  async answerPermission(run: RunRow, requestId: string, reply: ClientReply, keyId: string | null) {
    const { approvals, opts } = this.parts;
    const { row, delivered } = await approvals.answer(run, requestId, reply, keyId);
    const owner = run.instanceId;
    if (!delivered && owner && owner !== opts.instanceId()) {
      await opts.cluster.remote.answered(run.id, requestId, owner);
    }
    return row;
  }

  /**
   * Ends a run by a client's request: a running one is asked to end its turn within `graceMs`;
   * one another instance executes gets the command `kind` there.
   */
  private async stop(
    runId: string,
    kind: "cancel" | "interrupt",
    graceMs: number,
    again = true,
  ): Promise<void> {
    const { admission, execution } = this.parts;
    const run = admission.get(runId);
    if (!run) return this.stopElsewhere(runId, kind, graceMs, again);
    if (run.life.state === "handed_over") {
      // Back in the database's queue: stopped as any run this instance does not hold.
      await run.life.left;
      return this.stop(runId, kind, graceMs, again);
    }
    if (!run.life.accepts(kind)) {
      // Its outcome is known, its completion on the way: too late to cancel. Answered once the
      // run is over, so that the client then reads it finished.
      const { outcome } = run.life;
      await run.life.left;
      throw new RunFinishedError(runId, outcome ?? "unknown");
    }
    if (run.life.fire({ type: kind }) === "stopping") return this.endTurn(run, graceMs);
    // It never started: out of its line or the queue, and ended without its agent.
    admission.withdraw(run);
    await execution.endUnstarted(run);
    admission.remove(run);
  }

  /** Stops a run this instance does not hold: queued in the database, or another instance's. */
  private async stopElsewhere(
    runId: string,
    kind: "cancel" | "interrupt",
    graceMs: number,
    again: boolean,
  ): Promise<void> {
    const { execution, recorder, opts } = this.parts;
    const { db, cluster, instanceId } = opts;
    // Ended here, its completion not stored yet: stored first, so that it is answered finished.
    await recorder.storeNow(runId);
    const row = await getRun(db, runId);
    const mine = row?.status === "queued" && row.instanceId === instanceId();
    const failedToken = mine && cluster.claims.hasFailed(row.claimToken) ? row.claimToken : null;
    if (
      row?.status === "queued" &&
      ((row.instanceId === null && row.handover !== null) || failedToken !== null)
    ) {
      // Queued for any instance, or this one's by a claim that failed: claimed (taken from that
      // claim, before the ledger gives it back) to end it, never started. Ended within the
      // claim, which shutdown waits for (ending never rejects: a completion the database would
      // not take waits in the recorder).
      const ended = await cluster.claims.claim(async (claim) => {
        const claimed = await claimRun(db, runId, claim, failedToken);
        if (!claimed) return false;
        const unstarted = await this.queue.runFromRow(claimed);
        unstarted.life.fire({ type: "cancel" });
        await execution.endUnstarted(unstarted);
        return true;
      });
      if (!ended) return this.cancel(runId);
      return;
    }
    if (again && mine && cluster.shared) {
      // Claimed here by a claim in progress, which starts the run or gives it back.
      await cluster.claims.settled();
      return this.stop(runId, kind, graceMs, false);
    }
    const owner = row?.instanceId;
    if (row && owner && owner !== instanceId() && OPEN_STATUSES.includes(row.status)) {
      const status = await cluster.remote.stop({ ...row, instanceId: owner }, kind);
      if (status === "cancelled") return;
      throw new RunFinishedError(runId, status ?? "unknown");
    }
    throw new RunFinishedError(runId, row?.status ?? "unknown");
  }

  /**
   * Asks the run's CLI to end its turn and stops it when it has not within `graceMs`; one whose
   * back-end cannot be asked is stopped at once. What waits for an answer is refused first, so
   * that no later answer reaches the CLI, within the same grace (its row is written first).
   */
  private async endTurn(run: ActiveRun, graceMs: number): Promise<void> {
    // A back-end this instance does not run (a claimed run it is about to refuse) cannot be asked.
    const interruptible = this.parts.opts.agents.all.some(
      (backend) => backend.name === run.session.agent && backend.interruptible,
    );
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<"late">((resolve) => {
      timer = setTimeout(() => resolve("late"), graceMs);
    });
    const asked = this.parts.approvals.stopping(run).then(async () => {
      if (!interruptible) return "late" as const;
      run.interruption.abort();
      await run.life.left;
      return "ended" as const;
    });
    const ended = await Promise.race([asked, late]);
    clearTimeout(timer);
    if (ended === "late") run.abort.abort();
    await run.life.left;
  }
}
