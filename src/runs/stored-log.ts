import type { BridgeEvent } from "../events.js";
import type { Database } from "../store/db.js";
import { listEvents } from "../store/runs.js";
import type { LogView, SequencedEvent } from "./run-log.js";

const PAGE = 1000;

/** Replays a finished run's log from the database, a page at a time. */
export async function* readStoredLog(
  db: Database,
  runId: string,
  view: LogView,
  after: number,
): AsyncGenerator<SequencedEvent> {
  let position = after;
  for (;;) {
    const rows = await listEvents(db, runId, { view, after: position, limit: PAGE });
    for (const row of rows) {
      yield {
        seq: row.seq,
        publicSeq: row.publicSeq,
        event: { type: row.type, ...row.data } as BridgeEvent,
      };
      position = (view === "full" ? row.seq : row.publicSeq) ?? position;
    }
    if (rows.length < PAGE) return;
  }
}
