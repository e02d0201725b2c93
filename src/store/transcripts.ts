import { eq } from "drizzle-orm";
import type { Database } from "./db.js";
import { agentTranscripts } from "./schema.js";

export type StoredTranscript = typeof agentTranscripts.$inferSelect;

export async function getTranscript(
  db: Database,
  sessionId: string,
): Promise<StoredTranscript | undefined> {
  const [row] = await db
    .select()
    .from(agentTranscripts)
    .where(eq(agentTranscripts.sessionId, sessionId));
  return row;
}

/** Where the session's transcript is and its SHA-256, without its bytes. */
export async function transcriptDigest(
  db: Database,
  sessionId: string,
): Promise<{ path: string; sha256: string } | undefined> {
  const [row] = await db
    .select({ path: agentTranscripts.path, sha256: agentTranscripts.sha256 })
    .from(agentTranscripts)
    .where(eq(agentTranscripts.sessionId, sessionId));
  return row;
}

export async function putTranscript(
  db: Database,
  transcript: Omit<StoredTranscript, "updatedAt">,
): Promise<void> {
  const row = { ...transcript, updatedAt: new Date() };
  await db
    .insert(agentTranscripts)
    .values(row)
    .onConflictDoUpdate({ target: agentTranscripts.sessionId, set: row });
}
