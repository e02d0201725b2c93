import { bareCompletion } from "../events.js";
import type { Logger } from "../log.js";
import { bootId, terminateGroup } from "../process/groups.js";
import type { Database } from "../store/db.js";
import { lastEventSeqs } from "../store/events.js";
import { cancelPendingRequests } from "../store/permissions.js";
import { unfinishedRuns } from "../store/runs.js";
import type { DeadInstance } from "./cluster-port.js";
import type { CompletionRecorder, RunTransactionHook } from "./recording.js";

export interface RecoveryOptions {
  db: Database;
  logger: Logger;
  recorder: CompletionRecorder;
  /** Every registered hook: which ones a run left behind had joined is not known here. */
  hooks: readonly RunTransactionHook[];
  /** Time between SIGTERM and SIGKILL when a group left by a dead instance is stopped. */
  killGraceMs: number;
}

/**
 * Closes the runs a dead instance left queued, running or waiting (`null`: runs of a version
 * before instances): each gets an `interrupted` completion, once, which frees its session. The
 * process group of a run is stopped only where it can still be the CLI's: on this host, in this
 * boot. Resolves with the number of runs closed.
 */
export async function reapRuns(
  opts: RecoveryOptions,
  instance: DeadInstance | null,
): Promise<number> {
  const { db, logger, recorder, hooks, killGraceMs } = opts;
  const left = await unfinishedRuns(db, instance?.id ?? null);
  let closed = 0;
  for (const row of left) {
    const orphaned = instance === null || instance.processGone;
    if (orphaned && row.pgid && row.pgidBootId === bootId()) {
      await terminateGroup(row.pgid, killGraceMs, logger);
    }
    // Its permission requests wait for nobody now.
    await cancelPendingRequests(db, row.id);
    const last = await lastEventSeqs(db, row.id);
    const { state } = await recorder.record(
      row,
      { seq: last.seq + 1, publicSeq: last.publicSeq + 1 },
      {
        ...bareCompletion("interrupted", "the server stopped before the run finished"),
        error_code: "interrupted",
      },
      hooks,
    );
    if (state === "stored") closed++;
    logger.warn("closed a run left unfinished by an instance that is gone", {
      run_id: row.id,
      instance_id: instance?.id ?? null,
    });
  }
  return closed;
}
