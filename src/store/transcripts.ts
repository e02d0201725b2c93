import { and, asc, eq, sql } from "drizzle-orm";
import type { Database } from "./db.js";
import { agentTranscriptPieces, agentTranscripts } from "./schema.js";

// A session's stored CLI transcript: a head (where, how long, its seam) and its bytes in pieces.
// Every write changes the head first, so a reader that locks the head (a fork's copy) sees the
// pieces that go with it.

export type TranscriptHead = typeof agentTranscripts.$inferSelect;

/** Where the session's stored transcript is, its length and seam, without its bytes. */
export async function transcriptHead(
  db: Database,
  sessionId: string,
): Promise<TranscriptHead | undefined> {
  const [row] = await db
    .select()
    .from(agentTranscripts)
    .where(eq(agentTranscripts.sessionId, sessionId));
  return row;
}

/** The stored pieces in order, joined: one gzip stream of the transcript (empty when none). */
export async function transcriptGzipped(db: Database, sessionId: string): Promise<Buffer> {
  const pieces = await db
    .select({ gzipped: agentTranscriptPieces.gzipped })
    .from(agentTranscriptPieces)
    .where(eq(agentTranscriptPieces.sessionId, sessionId))
    .orderBy(asc(agentTranscriptPieces.seq));
  return Buffer.concat(pieces.map((piece) => piece.gzipped));
}

/** Stores the session's transcript whole: `gzipped` becomes its one piece. */
export async function putTranscript(
  db: Database,
  head: Omit<TranscriptHead, "updatedAt">,
  gzipped: Buffer,
): Promise<void> {
  const row = { ...head, updatedAt: new Date() };
  await db.transaction(async (tx) => {
    await tx
      .insert(agentTranscripts)
      .values(row)
      .onConflictDoUpdate({ target: agentTranscripts.sessionId, set: row });
    await tx
      .delete(agentTranscriptPieces)
      .where(eq(agentTranscriptPieces.sessionId, head.sessionId));
    await tx.insert(agentTranscriptPieces).values({ sessionId: head.sessionId, seq: 0, gzipped });
  });
}

/**
 * Adds `gzipped`, what the CLI appended, as the transcript's next piece, when the stored copy is
 * still `fromLength` long; false (nothing stored) when another store changed it meanwhile.
 */
export async function appendTranscript(
  db: Database,
  head: Pick<TranscriptHead, "sessionId" | "length" | "seam">,
  fromLength: number,
  gzipped: Buffer,
): Promise<boolean> {
  const { sessionId } = head;
  return db.transaction(async (tx) => {
    const updated = await tx
      .update(agentTranscripts)
      .set({ length: head.length, seam: head.seam, updatedAt: new Date() })
      .where(
        and(eq(agentTranscripts.sessionId, sessionId), eq(agentTranscripts.length, fromLength)),
      )
      .returning({ sessionId: agentTranscripts.sessionId });
    if (updated.length === 0) return false;
    const { seq, sessionId: of } = agentTranscriptPieces;
    const next = sql`(select coalesce(max(${seq}), -1) + 1 from ${agentTranscriptPieces} where ${of} = ${sessionId})`;
    await tx.insert(agentTranscriptPieces).values({ sessionId, seq: next, gzipped });
    return true;
  });
}
