import { and, asc, eq, isNull, lt } from "drizzle-orm";
import type { Database } from "./db.js";
import { type SessionRow, sessions } from "./schema.js";

// Session expiry, for the sweep: sessions idle past the TTL, and marking one expired.

/** Live sessions whose last activity is before `cutoff`, the longest idle first. */
export async function idleSessions(
  db: Database,
  cutoff: Date,
  limit: number,
): Promise<SessionRow[]> {
  return db
    .select()
    .from(sessions)
    .where(and(isNull(sessions.expiredAt), lt(sessions.lastActivityAt, cutoff)))
    .orderBy(asc(sessions.lastActivityAt))
    .limit(limit);
}

/** The session as it is now, whoever owns it. */
export async function sessionById(db: Database, id: string): Promise<SessionRow | undefined> {
  const [row] = await db.select().from(sessions).where(eq(sessions.id, id));
  return row;
}

/** Marks the session expired, unless it already is; false when nothing changed. */
export async function expireSession(db: Database, id: string, at: Date): Promise<boolean> {
  const rows = await db
    .update(sessions)
    .set({ expiredAt: at, updatedAt: at })
    .where(and(eq(sessions.id, id), isNull(sessions.expiredAt)))
    .returning({ id: sessions.id });
  return rows.length > 0;
}
