import { bareCompletion } from "../events.js";
import type { Logger } from "../log.js";
import { bootId, terminateGroup } from "../process/groups.js";
import type { Database } from "../store/db.js";
import { lastEventSeqs } from "../store/events.js";
import { unfinishedRuns } from "../store/runs.js";
import type { CompletionRecorder, RunTransactionHook } from "./recording.js";

export interface RecoveryOptions {
  db: Database;
  logger: Logger;
  recorder: CompletionRecorder;
  /** Every registered hook: which ones a run left behind had joined is not known here. */
  hooks: readonly RunTransactionHook[];
  /** Time between SIGTERM and SIGKILL when a group left by an earlier process is stopped. */
  killGraceMs: number;
}

/**
 * Closes the runs a previous process left queued or running: their process groups are killed
 * and each gets an `interrupted` completion, which frees its session. Resolves with their number.
 */
export async function recoverRuns(opts: RecoveryOptions): Promise<number> {
  const { db, logger, recorder, hooks, killGraceMs } = opts;
  const left = await unfinishedRuns(db);
  for (const row of left) {
    // Only a group of this boot can still be the CLI's; after a reboot the number is anyone's.
    if (row.pgid && row.pgidBootId === bootId()) {
      await terminateGroup(row.pgid, killGraceMs, logger);
    }
    const last = await lastEventSeqs(db, row.id);
    await recorder.record(
      row,
      { seq: last.seq + 1, publicSeq: last.publicSeq + 1 },
      bareCompletion("interrupted", "the server stopped before the run finished"),
      hooks,
    );
    logger.warn("closed a run left unfinished by a previous process", { run_id: row.id });
  }
  return left.length;
}
