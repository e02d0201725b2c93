import type { RouteHandler } from "@hono/zod-openapi";
import { enforcePolicy } from "../../../auth/policy.js";
import { resolveWorkDir, WorkDirNotAllowedError } from "../../../auth/work-dir.js";
import { DomainError, InvalidRequestError, NotFoundError } from "../../../errors.js";
import { errorText } from "../../../log.js";
import { settingsWithDefaults } from "../../../session-settings.js";
import { inOneSnapshot } from "../../../store/db.js";
import { activeRunIds } from "../../../store/runs.js";
import * as store from "../../../store/sessions.js";
import { getSessionWorktree, sessionWorktrees } from "../../../store/worktrees.js";
import type { Git } from "../../../worktrees/git.js";
import {
  checkWorktreePrerequisites,
  WorktreePrerequisiteError,
} from "../../../worktrees/prerequisites.js";
import { discardSessionWorktree } from "../../../worktrees/sessions.js";
import { findSessionWorktree, isDirty } from "../../../worktrees/worktree.js";
import { resolveAddDirs } from "../../add-dirs.js";
import { mcpServerIssues, requestedAgent, settingIssues } from "../../agent-settings.js";
import type { AppEnv } from "../../context.js";
import { decodeCursor, pageOf } from "../../cursor.js";
import type * as routes from "./sessions.routes.js";
import { toSession } from "./sessions.schemas.js";

/** A worktree session needs a git repository with origin/HEAD to branch off: refused otherwise. */
async function requireWorktreePrerequisites(git: Git) {
  try {
    await checkWorktreePrerequisites(git);
  } catch (err) {
    if (!(err instanceof WorktreePrerequisiteError)) throw err;
    const message = `worktree mode is unavailable: ${err.message}`;
    throw new DomainError("worktree_unavailable", message, {
      errors: [{ location: "body", path: "worktree", message }],
    });
  }
}

const worktreeDirty = (path: string) =>
  new DomainError(
    "worktree_dirty",
    `The session's worktree at ${path} has uncommitted changes; commit or discard them, or delete with ?force=true to discard them`,
  );

export const createSession: RouteHandler<typeof routes.createSession, AppEnv> = async (c) => {
  const body = c.req.valid("json");
  const { config } = c.var;
  let workDir: string | null = null;
  if (body.work_dir !== undefined) {
    try {
      workDir = await resolveWorkDir(body.work_dir, config.allowedRoots);
    } catch (err) {
      if (!(err instanceof WorkDirNotAllowedError)) throw err;
      throw new DomainError("work_dir_not_allowed", err.message, {
        errors: [{ location: "body", path: "work_dir", message: err.message }],
      });
    }
  }
  const agent = requestedAgent(c.var.agents, body.agent ?? config.agents.default);
  const settings = settingsWithDefaults(config, agent.name, {
    permissionMode: body.permission_mode,
    effort: body.effort,
    model: body.model,
    systemPrompt: body.system_prompt,
    worktree: body.worktree,
    mcpServers: body.mcp_servers,
    maxTurns: body.max_turns,
    maxBudgetUsd: body.max_budget_usd,
    approvals: body.approvals,
    disallowedTools: body.disallowed_tools,
    toolRules: body.tool_rules,
    addDirs: body.add_dirs && (await resolveAddDirs(body.add_dirs, config.allowedRoots)),
    requireCleanWorkDir: body.require_clean_work_dir,
  });
  const refused = [
    ...mcpServerIssues(config.agents.mcpServers, settings.mcpServers),
    ...settingIssues(agent, settings),
  ];
  if (refused.length > 0) throw new InvalidRequestError(refused);
  await enforcePolicy(c.var.db, config, c.var.principal.keyId, { settings, workDir });
  if (settings.worktree) {
    await requireWorktreePrerequisites(
      c.var.git.forSession(c.var.principal.keyId, workDir ?? config.workDir),
    );
  }
  const row = await store.createSession(c.var.db, {
    ownerKeyId: c.var.principal.keyId,
    workDir,
    title: body.title ?? null,
    agent: agent.name,
    ...settings,
    approvalTimeoutSeconds: body.approval_timeout_seconds ?? null,
    metadata: body.metadata ?? {},
  });
  return c.json(toSession(row, c.var.config), 201, { Location: `/v1/sessions/${row.id}` });
};

export const listSessions: RouteHandler<typeof routes.listSessions, AppEnv> = async (c) => {
  const { limit, cursor } = c.req.valid("query");
  const after = cursor === undefined ? undefined : decodeCursor(cursor);
  const { db, config } = c.var;
  // One snapshot: a session's row and its active run as of one moment.
  const { page, next_cursor, worktrees, active } = await inOneSnapshot(db, async (tx) => {
    // One row more than asked tells whether another page exists.
    const rows = await store.listSessions(tx, c.var.principal, { limit: limit + 1, after });
    const { page, next_cursor } = pageOf(rows, limit, (row) => row);
    const [worktrees, active] = await Promise.all([
      sessionWorktrees(
        tx,
        page.filter((row) => row.worktree).map((row) => row.id),
      ),
      activeRunIds(
        tx,
        page.map((row) => row.id),
      ),
    ]);
    return { page, next_cursor, worktrees, active };
  });
  const data = page.map((row) =>
    toSession(row, config, { worktree: worktrees.get(row.id), activeRunId: active.get(row.id) }),
  );
  return c.json({ data, next_cursor }, 200);
};

export const getSession: RouteHandler<typeof routes.getSession, AppEnv> = async (c) => {
  const { id } = c.req.valid("param");
  const { row, worktree, active } = await inOneSnapshot(c.var.db, async (tx) => {
    const row = await store.getSession(tx, id, c.var.principal);
    if (!row) throw new NotFoundError("session", id);
    const [worktree, active] = await Promise.all([
      row.worktree ? getSessionWorktree(tx, id) : undefined,
      activeRunIds(tx, [id]),
    ]);
    return { row, worktree, active };
  });
  return c.json(toSession(row, c.var.config, { worktree, activeRunId: active.get(id) }), 200);
};

export const deleteSession: RouteHandler<typeof routes.deleteSession, AppEnv> = async (c) => {
  const { id } = c.req.valid("param");
  const force = c.req.valid("query").force === "true";
  const session = await store.getSession(c.var.db, id, c.var.principal);
  if (!session) throw new NotFoundError("session", id);
  const git = c.var.git.forSession(session.ownerKeyId, session.workDir ?? c.var.config.workDir);
  // Refused before anything is stopped: a dirty worktree keeps its session, runs included.
  if (session.worktree && !force) {
    const found = await findSessionWorktree(git, id).catch(() => undefined);
    if (found && (await isDirty(git, found.path))) throw worktreeDirty(found.path);
  }
  // In the session's admission order: its runs are stopped first and no message gets in, so that
  // no CLI outlives the rows it writes to or makes the worktree again.
  const deleted = await c.var.runs.deleteSession(id, async () => {
    if (session.worktree) {
      try {
        const removed = await discardSessionWorktree(c.var.db, git, id, { force });
        if (removed.outcome === "kept_dirty") throw worktreeDirty(removed.path);
      } catch (err) {
        if (err instanceof DomainError) throw err;
        // The session goes anyway: a repository that git cannot work on must not pin it.
        c.var.logger.warn("could not remove the worktree of a deleted session", {
          session_id: id,
          error: errorText(err),
        });
      }
    }
    return store.deleteSession(c.var.db, id);
  });
  if (!deleted) throw new NotFoundError("session", id);
  return c.body(null, 204);
};
