import { randomUUID } from "node:crypto";
import { and, eq, isNotNull, notInArray, or, sql } from "drizzle-orm";
import type { Database } from "./db.js";
import { appendFeed, sessionCreated } from "./feed.js";
import { newestFirst, olderThan } from "./paging.js";
import { OPEN_STATUSES } from "./runs.js";
import {
  agentTranscriptPieces,
  agentTranscripts,
  type RunRow,
  runs,
  type SessionRow,
  sessions,
} from "./schema.js";
import { conversationApiMs } from "./sessions.js";

// What forking a session reads and writes: the run it branches after and the message its
// conversation goes on from, and the new session with a copy of the original's transcript.

export type ForkPoint =
  /** `run` is finished; `resumeAt`: the last message it or a run before it confirmed, if any. */
  | { kind: "found"; run: RunRow; resumeAt: string | null }
  /** The run named is not one of the session's (or the session has no finished run). */
  | { kind: "missing" }
  /** The run named has not finished. */
  | { kind: "open"; run: RunRow };

/**
 * The session's run `atRunId` (default: its newest finished run) and the last message a run of
 * the session up to it, itself included, confirmed: where a fork's conversation goes on from.
 */
export async function forkPoint(
  db: Database,
  sessionId: string,
  atRunId: string | undefined,
): Promise<ForkPoint> {
  const [run] =
    atRunId === undefined
      ? await db
          .select()
          .from(runs)
          .where(and(eq(runs.sessionId, sessionId), notInArray(runs.status, [...OPEN_STATUSES])))
          .orderBy(...newestFirst(runs.createdAt, runs.id))
          .limit(1)
      : await db
          .select()
          .from(runs)
          .where(and(eq(runs.sessionId, sessionId), eq(runs.id, atRunId)));
  if (!run) return { kind: "missing" };
  if (OPEN_STATUSES.includes(run.status)) return { kind: "open", run };
  const [confirmed] = await db
    .select({ uuid: runs.lastMessageUuid })
    .from(runs)
    .where(
      and(
        eq(runs.sessionId, sessionId),
        isNotNull(runs.lastMessageUuid),
        or(eq(runs.id, run.id), olderThan(runs.createdAt, runs.id, run)),
      ),
    )
    .orderBy(...newestFirst(runs.createdAt, runs.id))
    .limit(1);
  return { kind: "found", run, resumeAt: confirmed?.uuid ?? null };
}

/** What a fork's row takes besides its id and times (its usage starts at nothing). */
export type NewFork = Omit<
  SessionRow,
  | "id"
  | "createdAt"
  | "updatedAt"
  | "lastActivityAt"
  | "expiredAt"
  | "agentSessionId"
  | "inputTokens"
  | "outputTokens"
  | "cacheReadTokens"
  | "cacheCreationTokens"
  | "costUsd"
  | "numTurns"
  | "runs"
>;

/**
 * Inserts the fork with a copy of the original's stored transcript (every piece) as its own, in
 * one transaction: the fork's first run resumes from the copy, whatever the original does after.
 * The fork's origin keeps the API time the copied conversation had taken, which the CLI's
 * running total in the fork starts from.
 */
export async function createFork(
  db: Database,
  fork: NewFork,
  originalId: string,
  id: string = randomUUID(),
): Promise<SessionRow> {
  return db.transaction(async (tx) => {
    const now = new Date();
    const [before] = await tx
      .select({ apiMs: conversationApiMs(originalId) })
      .from(sessions)
      .where(eq(sessions.id, originalId));
    const forkedFrom = fork.forkedFrom && { ...fork.forkedFrom, apiMsBefore: before?.apiMs ?? 0 };
    const [row] = await tx
      .insert(sessions)
      .values({ ...fork, forkedFrom, id, createdAt: now, updatedAt: now, lastActivityAt: now })
      .returning();
    if (!row) throw new Error("insert into sessions returned no row");
    // Locked, so that a store of the original's transcript meanwhile (which changes the head
    // first) is copied whole or not at all.
    const [head] = await tx
      .select()
      .from(agentTranscripts)
      .where(eq(agentTranscripts.sessionId, originalId))
      .for("share");
    if (head) {
      await tx.insert(agentTranscripts).values({ ...head, sessionId: id, updatedAt: now });
      await tx.insert(agentTranscriptPieces).select(
        tx
          .select({
            sessionId: sql<string>`${id}::uuid`.as("session_id"),
            seq: agentTranscriptPieces.seq,
            gzipped: agentTranscriptPieces.gzipped,
          })
          .from(agentTranscriptPieces)
          .where(eq(agentTranscriptPieces.sessionId, originalId)),
      );
    }
    await appendFeed(tx, [sessionCreated(row)]);
    return row;
  });
}
