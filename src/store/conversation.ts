import { and, asc, eq, gt, gte, or } from "drizzle-orm";
import type { Database } from "./db.js";
import { listEventBatches, type SequencedEvent } from "./events.js";
import { type RunRow, runs } from "./schema.js";

// What a session's conversation is read from (`GET /v1/sessions/{id}/messages`): its runs in the
// session's order, oldest first, and each run's whole event log.

/**
 * Up to `limit` runs of the session, oldest first (ties broken by id), from the run at `from`
 * on, that run included; from its first run without `from`.
 */
export async function sessionRunsFrom(
  db: Database,
  sessionId: string,
  from: { createdAt: Date; id: string } | undefined,
  limit: number,
): Promise<RunRow[]> {
  return db
    .select()
    .from(runs)
    .where(
      and(
        eq(runs.sessionId, sessionId),
        from
          ? or(
              gt(runs.createdAt, from.createdAt),
              and(eq(runs.createdAt, from.createdAt), gte(runs.id, from.id)),
            )
          : undefined,
      ),
    )
    .orderBy(asc(runs.createdAt), asc(runs.id))
    .limit(limit);
}

/** Batches read per statement when a run's whole log is read. */
const BATCHES_PER_READ = 256;

/** Every event of the run's log, in order (`?events=full` numbering), read a page of batches at a time. */
export async function* runEventLog(db: Database, runId: string): AsyncGenerator<SequencedEvent> {
  let fromSeq = 0;
  for (;;) {
    const batches = await listEventBatches(db, runId, {
      view: "full",
      after: 0,
      fromSeq,
      limit: BATCHES_PER_READ,
    });
    for (const batch of batches) {
      for (const event of batch) if (event.seq > fromSeq) yield event;
      fromSeq = batch.at(-1)?.seq ?? fromSeq;
    }
    if (batches.length < BATCHES_PER_READ) return;
  }
}
