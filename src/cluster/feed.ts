import { type Database, inOneSnapshot } from "../store/db.js";
import {
  FEED_BEGINNING,
  type FeedFilter,
  type FeedPosition,
  feedBounds,
  feedPending,
  feedPositionText,
  listFeed,
  positionOf,
} from "../store/feed.js";
import type { FeedEventRow } from "../store/schema.js";
import type { FeedWatch } from "./doorbell.js";

// Following the live feed (GET /v1/events) from the database, on any instance: what is stored
// after the reader's position, then, at each ring of the doorbell (a NOTIFY at the commit of a
// feed row, on any instance; on the embedded database, this process's own), what was stored
// since. Rows are read in (xid, id) order up to the oldest open transaction (src/store/feed.ts), so
// reading after the last row read never skips a row that commits late. While stored rows are held
// back behind an open transaction, the follower looks again on a short timer too: that
// transaction's end rings only if it appended to the feed.

/** Rows read per statement. */
const PAGE = 500;
/** How soon a follower looks again for rows held back, at first and at most. */
const HELD_BACK_FIRST_MS = 20;
const HELD_BACK_MAX_MS = 1000;

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
  return `id: ${feedPositionText(positionOf(row))}\nevent: ${row.type}\ndata: ${JSON.stringify(event)}\n\n`;
}

/** Where a reader starts, and the first frames it gets. */
export interface FeedStart {
  /** The feed position the stream starts after (before its first frame). */
  position: FeedPosition;
  /** The last row read so far (where the next read starts). */
  after: FeedPosition;
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
  resume: FeedPosition | undefined,
  filter: FeedFilter,
  now: Date,
): Promise<FeedStart> {
  return inOneSnapshot(db, async (tx) => {
    const { floor, last, lost } = await feedBounds(tx, resume ?? FEED_BEGINNING);
    const frames: string[] = [];
    let position: FeedPosition;
    if (resume === undefined) {
      position = last ?? FEED_BEGINNING;
      // An `id:` alone: an EventSource resumes from here should it reconnect before any event.
      frames.push(`id: ${feedPositionText(position)}\n\n`);
    } else if (lost) {
      position = floor ?? FEED_BEGINNING;
      const reset = {
        type: "feed_reset",
        at: now.toISOString(),
        after: feedPositionText(resume),
        message:
          "the feed no longer holds every event after this position (or never held it): some may be missed; what follows is everything it holds",
      };
      frames.push(
        `id: ${feedPositionText(position)}\nevent: feed_reset\ndata: ${JSON.stringify(reset)}\n\n`,
      );
    } else {
      position = resume;
    }
    const rows = await listFeed(tx, position, filter, PAGE);
    frames.push(...rows.map(feedFrame));
    const lastRow = rows.at(-1);
    return {
      position,
      after: lastRow ? positionOf(lastRow) : position,
      frames,
      more: rows.length === PAGE,
    };
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
    let heldBackMs = HELD_BACK_FIRST_MS;
    // Without `follow`: the newest transaction stored after the reader's position when it first
    // caught up; it reads up to that one's rows (waiting for them if they are held back).
    let until: string | undefined;
    for (;;) {
      if (!more) {
        const pending = await feedPending(db, after, filter, until);
        if (!follow) {
          if (pending.newest === null) return;
          until ??= pending.newest;
        }
        if (!pending.settled) {
          if (!(await watch.next(signal, pending.heldBack ? heldBackMs : undefined))) return;
          heldBackMs = pending.heldBack
            ? Math.min(heldBackMs * 2, HELD_BACK_MAX_MS)
            : HELD_BACK_FIRST_MS;
        }
      }
      const rows = await listFeed(db, after, filter, PAGE);
      const last = rows.at(-1);
      if (last) {
        yield rows.map(feedFrame);
        after = positionOf(last);
        heldBackMs = HELD_BACK_FIRST_MS;
      }
      more = rows.length === PAGE;
    }
  } finally {
    watch.close();
  }
}
