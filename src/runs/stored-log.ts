import type { Database } from "../store/db.js";
import {
  type LogView,
  listEventBatches,
  positionIn,
  type SequencedEvent,
} from "../store/events.js";

/** Batches read per query: up to a few MB of events (a batch is about 1 MB at most). */
const PAGE = 8;

/** Reads a run's stored log after position `after` of the view, a batch at a time. */
export async function* readStoredLog(
  db: Database,
  runId: string,
  view: LogView,
  after: number,
): AsyncGenerator<SequencedEvent[]> {
  // Pages continue after the last batch read, counted in `seq` (the batches' key).
  let fromSeq = after;
  for (;;) {
    const batches = await listEventBatches(db, runId, { view, after, fromSeq, limit: PAGE });
    for (const batch of batches) {
      yield batch.filter((entry) => positionIn(view, entry) > after);
      fromSeq = batch.at(-1)?.seq ?? fromSeq;
    }
    if (batches.length < PAGE) return;
  }
}
