import { z } from "@hono/zod-openapi";
import { DomainError } from "../../../errors.js";

// The conversation's cursor: a position between two items, opaque to clients (base64url JSON):
// after the item at `seq` of the run (`createdAt`, `id`). Runs are in the session's order (oldest
// first, ties broken by id), items in their run's log order. `seq: -1` is the position before a
// run's first item (its message, seq 0).

export interface ItemPosition {
  run: { createdAt: Date; id: string };
  seq: number;
}

// The times both Postgres and JS hold (as in ../../cursor.ts).
const EARLIEST = Date.parse("0001-01-01T00:00:00Z");
const LATEST = Date.parse("9999-12-31T23:59:59.999Z");

const Key = z.strictObject({
  t: z.iso
    .datetime()
    .transform((t) => new Date(t))
    .refine((t) => t.getTime() >= EARLIEST && t.getTime() <= LATEST),
  id: z.uuid(),
  s: z
    .number()
    .int()
    .min(-1)
    .max(2 ** 31 - 1),
});

export function encodeItemCursor(position: ItemPosition): string {
  const key = { t: position.run.createdAt.toISOString(), id: position.run.id, s: position.seq };
  return Buffer.from(JSON.stringify(key)).toString("base64url");
}

export function decodeItemCursor(cursor: string): ItemPosition {
  try {
    const key = Key.parse(JSON.parse(Buffer.from(cursor, "base64url").toString("utf8")));
    return { run: { createdAt: key.t, id: key.id }, seq: key.s };
  } catch {
    throw new DomainError(
      "invalid_cursor",
      "cursor is not one this server returned as next_cursor",
    );
  }
}
