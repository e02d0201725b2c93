import type { RouteHandler } from "@hono/zod-openapi";
import { NotFoundError } from "../../../errors.js";
import { runEventLog, sessionRunsFrom } from "../../../store/conversation.js";
import { type Database, inOneSnapshot } from "../../../store/db.js";
import type { SequencedEvent } from "../../../store/events.js";
import type { RunRow } from "../../../store/schema.js";
import { getSession } from "../../../store/sessions.js";
import { type ConversationItem, runItems } from "../../../wire/conversation.js";
import type { AppEnv } from "../../context.js";
import { decodeItemCursor, encodeItemCursor, type ItemPosition } from "./conversation.cursor.js";
import type * as routes from "./conversation.routes.js";

/**
 * One page of the session's conversation: up to `limit` items after `after`, and the cursor to
 * the next page. Every run yields at least its message, so `limit + 2` runs (the cursor's own,
 * which may have nothing left after it, and one to tell whether more follows) are always enough.
 * A run's items are derived from its whole log (a tool call takes its result from a later event),
 * then cut at the cursor.
 */
async function conversationPage(
  db: Database,
  sessionId: string,
  limit: number,
  after: ItemPosition | undefined,
): Promise<{ data: ConversationItem[]; next_cursor: string | null }> {
  const runs = await sessionRunsFrom(db, sessionId, after?.run, limit + 2);
  const found: { item: ConversationItem; run: RunRow }[] = [];
  for (const run of runs) {
    if (found.length > limit) break;
    const events: SequencedEvent[] = [];
    for await (const event of runEventLog(db, run.id)) events.push(event);
    const from = after && run.id === after.run.id ? after.seq : -1;
    for (const item of runItems(run, events)) if (item.seq > from) found.push({ item, run });
  }
  const page = found.slice(0, limit);
  const last = page.at(-1);
  return {
    data: page.map((f) => f.item),
    next_cursor:
      found.length > limit && last ? encodeItemCursor({ run: last.run, seq: last.item.seq }) : null,
  };
}

export const listSessionMessages: RouteHandler<typeof routes.listSessionMessages, AppEnv> = async (
  c,
) => {
  const { id } = c.req.valid("param");
  const { limit, cursor } = c.req.valid("query");
  const after = cursor === undefined ? undefined : decodeItemCursor(cursor);
  // One snapshot: the runs' rows and their logs as of one moment (a run's completion is stored
  // with its row's end).
  const page = await inOneSnapshot(c.var.db, async (tx) => {
    if (!(await getSession(tx, id, c.var.principal))) throw new NotFoundError("session", id);
    return conversationPage(tx, id, limit, after);
  });
  return c.json(page, 200);
};
