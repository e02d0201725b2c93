import { bigserial, index, pgTable, text, uuid } from "drizzle-orm/pg-core";
import { ts } from "./columns.js";

// The live feed (GET /v1/events): what happened to sessions, runs and permission requests, one
// row per event, written in the transaction that makes it happen (src/store/feed.ts). Rows name
// their session and run without a foreign key: a feed event outlives what it reports (a deleted
// session's `session_deleted`), until the sweep prunes it.
export const feedEvents = pgTable(
  "feed_events",
  {
    /**
     * The event's place in the feed (its SSE `id:`). Taken under a lock held until commit
     * (appendFeed), so that ids commit in order: a reader after id N never misses a row that
     * commits later with a smaller id.
     */
    id: bigserial("id", { mode: "number" }).primaryKey(),
    type: text("type").notNull(),
    /** The key that owns the session it is about (null without keys): who may see it. */
    ownerKeyId: uuid("owner_key_id"),
    sessionId: uuid("session_id"),
    runId: uuid("run_id"),
    /** The type's own fields, as a JSON object (text: kept as written). */
    data: text("data").notNull(),
    createdAt: ts("created_at").notNull(),
  },
  (t) => [
    index("feed_events_owner_key_id_id_idx").on(t.ownerKeyId, t.id),
    index("feed_events_session_id_id_idx").on(t.sessionId, t.id),
  ],
);
