import { type Database, inOneSnapshot } from "../store/db.js";
import { type FeedFilter, feedBounds, listFeed } from "../store/feed.js";
import type { FeedEventRow } from "../store/schema.js";
import type { FeedWatch } from "./doorbell.js";

// Following the live feed (GET /v1/events) from the database, on any instance: what is stored
// after the reader's position, then, at each ring of the doorbell (a NOTIFY at the commit of a
// feed row, on any instance; on the embedded database, this process's own), what was stored
// since. Feed ids commit in order (src/store/feed.ts), so reading after the last id read never
// skips a row that commits late.

/** Rows read per statement. */
const PAGE = 500;

/** An SSE frame of a feed row: `data:` is the event as the API shows it (FeedEvent). */
export function feedFrame(row: FeedEventRow): string {
  const data = JSON.parse(row.data) as Record<string, unknown>;
  const event = {
    type: row.type,
    at: row.createdAt.toISOString(),
    key_id: row.ownerKeyId,
    session_id: row.sessionId,
    ...(row.runId ? { run_id: row.runId } : {}),
    ...data,
  };
  return `id: ${row.id}\nevent: ${row.type}\ndata: ${JSON.stringify(event)}\n\n`;
}

/** Where a reader starts, and the first frames it gets. */
export interface FeedStart {
  /** The feed position the stream starts after (before its first frame). */
  position: number;
  /** The last row read so far (where the next read starts). */
  after: number;
  frames: string[];
  /** The first read filled its page: more may be stored already. */
  more: boolean;
}

/**
 * Where a reader that asks to resume after `resume` starts (undefined: from now on), with the first
 * page, read in one snapshot with the feed's bounds: a prune cannot fall between the check and the
 * read. A position the feed no longer holds everything after (pruned), or never held, starts with
 * a `feed_reset` and everything the feed holds.
 */
export function feedStart(
  db: Database,
  resume: number | undefined,
  filter: FeedFilter,
  now: Date,
): Promise<FeedStart> {
  return inOneSnapshot(db, async (tx) => {
    const { min, max } = await feedBounds(tx);
    const frames: string[] = [];
    let position: number;
    if (resume === undefined) {
      position = max ?? 0;
      // An `id:` alone: an EventSource resumes from here should it reconnect before any event.
      frames.push(`id: ${position}\n\n`);
    } else if (resume > 0 && (min === null || resume < min - 1 || (max !== null && resume > max))) {
      position = min === null ? 0 : min - 1;
      const reset = {
        type: "feed_reset",
        at: now.toISOString(),
        after: resume,
        message:
          "the feed no longer holds every event after this id (or never held it): some may be missed; what follows is everything it holds",
      };
      frames.push(`id: ${position}\nevent: feed_reset\ndata: ${JSON.stringify(reset)}\n\n`);
    } else {
      position = resume;
    }
    const rows = await listFeed(tx, position, filter, PAGE);
    frames.push(...rows.map(feedFrame));
    return { position, after: rows.at(-1)?.id ?? position, frames, more: rows.length === PAGE };
  });
}

/**
 * The frames of the feed from `start` on: its first page, then what is stored after it, live
 * (`follow`) or until what is stored now is read. `watch` is the doorbell's, taken before `start`
 * was read (a row committed since has rung it); closed when this ends.
 */
export async function* followFeed(
  db: Database,
  watch: FeedWatch,
  start: FeedStart,
  filter: FeedFilter,
  follow: boolean,
  signal?: AbortSignal,
): AsyncGenerator<string[]> {
  try {
    yield start.frames;
    let { after, more } = start;
    for (;;) {
      if (!more) {
        if (!follow || !(await watch.next(signal))) return;
      }
      const rows = await listFeed(db, after, filter, PAGE);
      const last = rows.at(-1);
      if (last) {
        yield rows.map(feedFrame);
        after = last.id;
      }
      more = rows.length === PAGE;
    }
  } finally {
    watch.close();
  }
}
