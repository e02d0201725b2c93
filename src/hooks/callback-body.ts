import type { Database } from "../store/db.js";
import { getCompletionEvent, runText } from "../store/events.js";
import { meteredUsageOf } from "../store/model-calls.js";
import { getRun } from "../store/runs.js";
import { toRun } from "../wire/run.js";

/**
 * A callback's body: `{run, completion, text}`, the run as `GET /v1/runs/{id}` shows it (without
 * its own `callback` state, nor its `replies`, which are being sent meanwhile), its completion event, and all its text joined.
 */
export async function callbackBody(db: Database, runId: string): Promise<string> {
  const row = await getRun(db, runId);
  if (!row) throw new Error(`run ${runId} is gone`);
  const completion = (await getCompletionEvent(db, runId)) ?? null;
  const metered = (await meteredUsageOf(db, [runId])).get(runId) ?? null;
  const { callback: _, replies: __, ...run } = toRun(row, completion, null, false, metered);
  return JSON.stringify({ run, completion, text: await runText(db, runId) });
}
