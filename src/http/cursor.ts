import { z } from "@hono/zod-openapi";
import { DomainError } from "../errors.js";
import type { PageKey } from "../store/paging.js";

// Cursors are opaque to clients: base64url of the last row's sort key. A cursor that does not
// decode is the client's mistake (400), never a silent first page.

// The times both Postgres and JS hold. zod's ISO form has four-digit years, and of those JS takes
// year 0 (1 BC) while Postgres, which has no year 0, refuses it.
const EARLIEST = Date.parse("0001-01-01T00:00:00Z");
const LATEST = Date.parse("9999-12-31T23:59:59.999Z");

const Key = z.object({
  t: z.iso
    .datetime()
    .transform((t) => new Date(t))
    .refine((t) => t.getTime() >= EARLIEST && t.getTime() <= LATEST),
  id: z.uuid(),
});

export function encodeCursor(key: PageKey): string {
  return Buffer.from(JSON.stringify({ t: key.createdAt.toISOString(), id: key.id })).toString(
    "base64url",
  );
}

export function decodeCursor(cursor: string): PageKey {
  try {
    const key = Key.parse(JSON.parse(Buffer.from(cursor, "base64url").toString("utf8")));
    return { createdAt: key.t, id: key.id };
  } catch {
    throw new DomainError(
      "invalid_cursor",
      "cursor is not one this server returned as next_cursor",
    );
  }
}

/**
 * One page out of `rows`, which holds one row more than `limit` when another page follows, and
 * the cursor to it.
 */
export function pageOf<T>(
  rows: T[],
  limit: number,
  keyOf: (row: T) => PageKey,
): { page: T[]; next_cursor: string | null } {
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  return {
    page,
    next_cursor: rows.length > limit && last ? encodeCursor(keyOf(last)) : null,
  };
}

/** `?limit=&cursor=` of every paged list. */
export const PageQuery = z.strictObject({
  limit: z.coerce
    .number({ error: "expected a whole number from 1 to 100" })
    .int({ error: "expected a whole number from 1 to 100" })
    .min(1, { error: "expected a whole number from 1 to 100" })
    .max(100, { error: "expected a whole number from 1 to 100" })
    .default(20)
    .openapi({ param: { name: "limit", in: "query" }, example: 20 }),
  cursor: z
    .string()
    .max(200)
    .optional()
    .openapi({
      param: { name: "cursor", in: "query" },
      description: "`next_cursor` of the previous page.",
    }),
});
