import type { Logger } from "../log.js";
import type { Database } from "../store/db.js";
import type { WorktreeRow } from "../store/schema.js";
import { getSessionWorktree, saveSessionWorktree } from "../store/worktrees.js";
import type { Git } from "./git.js";
import {
  findSessionWorktree,
  type RemoveOutcome,
  removeSessionWorktree,
  restoreSessionWorktree,
  worktreeBranch,
} from "./worktree.js";

// A session's worktree kept in step with its record: what the run manager, the sweep and
// DELETE /v1/sessions/{id} do with it.

/** Before a run: a worktree directory deleted by hand gets its branch checked out again. */
export async function prepareSessionWorktree(
  git: Git,
  sessionId: string,
  logger: Logger,
): Promise<void> {
  const restored = await restoreSessionWorktree(git, sessionId);
  if (restored) {
    logger.warn("the session's worktree directory was gone; checked its branch out again", {
      session_id: sessionId,
      path: restored,
    });
  }
}

/**
 * After a run: records the worktree the CLI made or reused, as found on disk, and the host whose
 * disk that is (the session's runs are pinned there).
 */
export async function recordSessionWorktree(
  db: Database,
  git: Git,
  sessionId: string,
  host: string,
): Promise<WorktreeRow | undefined> {
  const found = await findSessionWorktree(git, sessionId);
  if (!found) return undefined;
  return saveSessionWorktree(db, sessionId, {
    path: found.path,
    branch: found.branch,
    baseRef: found.baseCommit,
    state: "active",
    host,
  });
}

/**
 * Removes the session's worktree and branch and records it; a dirty one is kept (unless `force`)
 * and recorded `kept_dirty` with its path.
 */
export async function discardSessionWorktree(
  db: Database,
  git: Git,
  sessionId: string,
  opts: { force: boolean },
): Promise<RemoveOutcome> {
  const result = await removeSessionWorktree(git, sessionId, opts);
  if (result.outcome === "absent") return result;
  const existing = await getSessionWorktree(db, sessionId);
  const path = result.path ?? existing?.path;
  if (!path) return result;
  await saveSessionWorktree(db, sessionId, {
    path,
    branch: worktreeBranch(sessionId),
    baseRef: existing?.baseRef ?? null,
    state: result.outcome,
  });
  return result;
}
