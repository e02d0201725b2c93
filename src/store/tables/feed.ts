import { sql } from "drizzle-orm";
import { bigserial, customType, index, pgTable, text, uuid } from "drizzle-orm/pg-core";
import { ts } from "./columns.js";

/**
 * A Postgres `xid8`: a 64-bit transaction id, read and written as its decimal text (beyond a JS
 * number's 2^53; compared in SQL only).
 */
const xid8 = customType<{ data: string; driverData: string }>({
  dataType: () => "xid8",
  fromDriver: (value) => String(value),
});

// The live feed (GET /v1/events): what happened to sessions, runs and permission requests, one
// row per event, written in the transaction that makes it happen (src/store/feed.ts). Rows name
// their session and run without a foreign key: a feed event outlives what it reports (a deleted
// session's `session_deleted`), until the sweep prunes it.
export const feedEvents = pgTable(
  "feed_events",
  {
    /** The event's order within its transaction (and the row's key). */
    id: bigserial("id", { mode: "number" }).primaryKey(),
    /**
     * The writer's transaction: the feed is read in (xid, id) order, up to the oldest transaction
     * still open (src/store/feed.ts), so that a row that commits late is never skipped.
     */
    xid: xid8("xid").notNull().default(sql`pg_current_xact_id()`),
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
    index("feed_events_xid_id_idx").on(t.xid, t.id),
    index("feed_events_owner_key_id_xid_id_idx").on(t.ownerKeyId, t.xid, t.id),
    index("feed_events_session_id_xid_id_idx").on(t.sessionId, t.xid, t.id),
  ],
);
