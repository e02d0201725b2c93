import { randomUUID } from "node:crypto";
import { desc, eq, inArray } from "drizzle-orm";
import type { Database } from "./db.js";
import { type WorktreeRow, worktrees } from "./schema.js";

export const WORKTREE_STATES = ["active", "removed", "kept_dirty"] as const;
export type WorktreeState = (typeof WORKTREE_STATES)[number];

/** The session's worktree record (a session has one worktree; the newest record wins). */
export async function getSessionWorktree(
  db: Database,
  sessionId: string,
): Promise<WorktreeRow | undefined> {
  const [row] = await db
    .select()
    .from(worktrees)
    .where(eq(worktrees.sessionId, sessionId))
    .orderBy(desc(worktrees.createdAt))
    .limit(1);
  return row;
}

/** The worktree records of several sessions at once, by session id. */
export async function sessionWorktrees(
  db: Database,
  sessionIds: string[],
): Promise<Map<string, WorktreeRow>> {
  const byId = new Map<string, WorktreeRow>();
  if (sessionIds.length === 0) return byId;
  const rows = await db
    .select()
    .from(worktrees)
    .where(inArray(worktrees.sessionId, sessionIds))
    .orderBy(worktrees.createdAt);
  for (const row of rows) byId.set(row.sessionId, row);
  return byId;
}

export interface WorktreeFacts {
  path: string;
  branch: string;
  baseRef: string | null;
  state: WorktreeState;
  /** The host whose disk holds it; left as it is when not given. */
  host?: string;
}

/** Writes what was found on disk into the session's record, creating it the first time. */
export async function saveSessionWorktree(
  db: Database,
  sessionId: string,
  facts: WorktreeFacts,
): Promise<WorktreeRow> {
  const now = new Date();
  const removedAt = facts.state === "removed" ? now : null;
  const existing = await getSessionWorktree(db, sessionId);
  if (existing) {
    const [row] = await db
      .update(worktrees)
      .set({ ...facts, baseRef: facts.baseRef ?? existing.baseRef, removedAt })
      .where(eq(worktrees.id, existing.id))
      .returning();
    if (!row) throw new Error("update of worktrees returned no row");
    return row;
  }
  const [row] = await db
    .insert(worktrees)
    .values({ id: randomUUID(), sessionId, ...facts, createdAt: now, removedAt })
    .returning();
  if (!row) throw new Error("insert into worktrees returned no row");
  return row;
}

/** Sets the state of the session's record, if it has one. */
export async function setSessionWorktreeState(
  db: Database,
  sessionId: string,
  state: WorktreeState,
): Promise<void> {
  const existing = await getSessionWorktree(db, sessionId);
  if (!existing) return;
  await db
    .update(worktrees)
    .set({ state, removedAt: state === "removed" ? new Date() : null })
    .where(eq(worktrees.id, existing.id));
}
