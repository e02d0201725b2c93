import { and, asc, eq, isNull, sql } from "drizzle-orm";
import type { Database } from "./db.js";
import { preparedFor } from "./prepared.js";
import { agentTranscriptPieces, agentTranscripts } from "./schema.js";

// A session's stored CLI transcript: a head (where, how long, its seam) and its bytes in pieces.
// Every write changes the head first, so a reader that locks the head (a fork's copy) sees the
// pieces that go with it.

export type TranscriptHead = typeof agentTranscripts.$inferSelect;

const headOf = preparedFor((db) =>
  db
    .select()
    .from(agentTranscripts)
    .where(eq(agentTranscripts.sessionId, sql.placeholder("sessionId")))
    .prepare("transcript_head"),
);

/** Where the session's stored transcript is, its length and seam, without its bytes. */
export async function transcriptHead(
  db: Database,
  sessionId: string,
): Promise<TranscriptHead | undefined> {
  const [row] = await headOf(db).execute({ sessionId });
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

/** The stored copy a store was read against: its length and seam (null for none yet). */
export type StoredCopy = Pick<TranscriptHead, "length" | "seam">;

/** The head of the session's transcript is still `copy`: the condition of every store. */
const stillAt = (sessionId: string, copy: StoredCopy) =>
  and(
    eq(agentTranscripts.sessionId, sessionId),
    eq(agentTranscripts.length, copy.length),
    copy.seam === null ? isNull(agentTranscripts.seam) : eq(agentTranscripts.seam, copy.seam),
  );

/**
 * Stores the session's transcript whole (`gzipped` becomes its one piece), over the stored copy
 * `over` (undefined: none is stored); false (nothing stored) when another store changed it since.
 */
export async function putTranscript(
  db: Database,
  head: Omit<TranscriptHead, "updatedAt">,
  gzipped: Buffer,
  over: StoredCopy | undefined,
): Promise<boolean> {
  const row = { ...head, updatedAt: new Date() };
  return db.transaction(async (tx) => {
    const written = over
      ? await tx
          .update(agentTranscripts)
          .set(row)
          .where(stillAt(head.sessionId, over))
          .returning({ sessionId: agentTranscripts.sessionId })
      : await tx
          .insert(agentTranscripts)
          .values(row)
          .onConflictDoNothing()
          .returning({ sessionId: agentTranscripts.sessionId });
    if (written.length === 0) return false;
    await tx
      .delete(agentTranscriptPieces)
      .where(eq(agentTranscriptPieces.sessionId, head.sessionId));
    await tx.insert(agentTranscriptPieces).values({ sessionId: head.sessionId, seq: 0, gzipped });
    return true;
  });
}

/**
 * Adds `gzipped`, what the CLI appended, as the transcript's next piece, when the stored copy is
 * still `from`; false (nothing stored) when another store changed it meanwhile.
 */
export async function appendTranscript(
  db: Database,
  head: Pick<TranscriptHead, "sessionId" | "length" | "seam">,
  from: StoredCopy,
  gzipped: Buffer,
): Promise<boolean> {
  const { sessionId } = head;
  return db.transaction(async (tx) => {
    const updated = await tx
      .update(agentTranscripts)
      .set({ length: head.length, seam: head.seam, updatedAt: new Date() })
      .where(stillAt(sessionId, from))
      .returning({ sessionId: agentTranscripts.sessionId });
    if (updated.length === 0) return false;
    const { seq, sessionId: of } = agentTranscriptPieces;
    const next = sql`(select coalesce(max(${seq}), -1) + 1 from ${agentTranscriptPieces} where ${of} = ${sessionId})`;
    await tx.insert(agentTranscriptPieces).values({ sessionId, seq: next, gzipped });
    return true;
  });
}
