import { z } from "@hono/zod-openapi";
import type { SessionKey } from "../store/sessions.js";
import { ApiError } from "./errors.js";

// Cursors are opaque to clients: base64url of the last row's sort key. A cursor that does not
// decode is the client's mistake (400), never a silent first page.

const Key = z.object({ t: z.iso.datetime(), id: z.uuid() });

export function encodeCursor(key: SessionKey): string {
  return Buffer.from(JSON.stringify({ t: key.createdAt.toISOString(), id: key.id })).toString(
    "base64url",
  );
}

export function decodeCursor(cursor: string): SessionKey {
  try {
    const key = Key.parse(JSON.parse(Buffer.from(cursor, "base64url").toString("utf8")));
    return { createdAt: new Date(key.t), id: key.id };
  } catch {
    throw new ApiError(
      400,
      "invalid_cursor",
      "cursor is not one this server returned as next_cursor",
    );
  }
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
