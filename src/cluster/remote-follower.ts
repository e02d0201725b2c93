import { readStoredLog } from "../runs/stored-log.js";
import type { Database } from "../store/db.js";
import {
  getCompletionEvent,
  type LogView,
  positionIn,
  type SequencedEvent,
} from "../store/events.js";
import { getRun, OPEN_STATUSES } from "../store/runs.js";
import type { Doorbell } from "./doorbell.js";

/**
 * Follows a run this process does not execute, from the stored log: what is stored after position
 * `after` of the view, then, at each ring of the doorbell, what was stored since, until the
 * completion. The events, their ids and order are the stored ones: those the owner's own
 * followers get. A run closed without one (its row gone, or a log from before completions) ends
 * when nothing more is stored.
 */
export async function* followElsewhere(
  db: Database,
  doorbell: Doorbell,
  runId: string,
  view: LogView,
  after: number,
  signal?: AbortSignal,
): AsyncGenerator<SequencedEvent[]> {
  // Watched before the first read: a batch stored meanwhile rings, and is read next.
  const watch = doorbell.watch(runId);
  let position = after;
  let seq = 0;
  try {
    for (;;) {
      let read = false;
      for await (const batch of readStoredLog(db, runId, view, position)) {
        const last = batch.at(-1);
        if (!last) continue;
        read = true;
        yield batch;
        position = positionIn(view, last);
        seq = last.seq;
        if (last.type === "completion") return;
      }
      if (!read && (await ended(db, runId))) {
        yield* readStoredLog(db, runId, view, position);
        return;
      }
      if (!(await watch.next(seq, signal))) return;
    }
  } finally {
    watch.close();
  }
}

/**
 * Whether the run's log takes nothing more: its row is closed or gone, or its completion is stored
 * (at or before where the reader started). Asked only when a read found nothing new. The
 * completion is stored with the run's closing: once the run reads closed, one more read of the
 * log has everything.
 */
async function ended(db: Database, runId: string): Promise<boolean> {
  const status = (await getRun(db, runId))?.status;
  if (!status || !OPEN_STATUSES.includes(status)) return true;
  return (await getCompletionEvent(db, runId)) !== undefined;
}
