import { and, desc, eq, lt, or, type SQL } from "drizzle-orm";
import type { AnyPgColumn } from "drizzle-orm/pg-core";

// Every paged list is newest first by (time, id): ties on the time are broken by id, so that
// paging never skips or repeats a row.

/** A position in a newest-first list: the last row of the previous page. */
export interface PageKey {
  createdAt: Date;
  id: string;
}

/** The rows after `after` in the order of `newestFirst` (no condition on the first page). */
export function olderThan(
  time: AnyPgColumn,
  id: AnyPgColumn,
  after: PageKey | undefined,
): SQL | undefined {
  return after
    ? or(lt(time, after.createdAt), and(eq(time, after.createdAt), lt(id, after.id)))
    : undefined;
}

export const newestFirst = (time: AnyPgColumn, id: AnyPgColumn) => [desc(time), desc(id)];
