import type { RouteHandler } from "@hono/zod-openapi";
import { enforcePolicy } from "../../../auth/policy.js";
import { DomainError, InvalidRequestError, NotFoundError } from "../../../errors.js";
import { settingsWithDefaults } from "../../../session-settings.js";
import { inOneSnapshot } from "../../../store/db.js";
import { activeRunIds } from "../../../store/runs.js";
import type { SessionRow } from "../../../store/schema.js";
import * as store from "../../../store/sessions.js";
import { getSessionWorktree } from "../../../store/worktrees.js";
import { worktreeDiff } from "../../../worktrees/diff.js";
import { GitError } from "../../../worktrees/git.js";
import { resolveAddDirs } from "../../add-dirs.js";
import { mcpServerIssues, requestedAgent, settingIssues } from "../../agent-settings.js";
import type { AppEnv } from "../../context.js";
import { toSessionDiff } from "./diff.schemas.js";
import { toSession } from "./sessions.schemas.js";
import type * as routes from "./settings.routes.js";
import type { UpdateSessionBody } from "./settings.schemas.js";

/** The session, when the caller may see it; 404 otherwise. */
async function visibleSession(
  c: Parameters<RouteHandler<typeof routes.updateSession, AppEnv>>[0],
  id: string,
) {
  const row = await store.getSession(c.var.db, id, c.var.principal);
  if (!row) throw new NotFoundError("session", id);
  return row;
}

/** Whether the patch names the field (`null` included: it sets it back). */
const given = <K extends keyof UpdateSessionBody>(body: UpdateSessionBody, key: K) =>
  body[key] !== undefined;

export const updateSession: RouteHandler<typeof routes.updateSession, AppEnv> = async (c) => {
  const { id } = c.req.valid("param");
  const body = c.req.valid("json");
  const { config, db, principal } = c.var;
  const session = await visibleSession(c, id);
  if (session.expiredAt) {
    throw new DomainError(
      "session_expired",
      `session ${id} has expired: its settings no longer change; create a new one`,
    );
  }
  const agent = requestedAgent(c.var.agents, session.agent);
  const current = store.sessionSettings(session);
  // What a session created without the field gets, for a `null`.
  const defaults = settingsWithDefaults(config, agent.name, {});
  const pick = <T>(value: T | null | undefined, now: T, reset: T): T =>
    value === undefined ? now : value === null ? reset : value;
  const addDirs =
    body.add_dirs === undefined || body.add_dirs === null
      ? body.add_dirs
      : await resolveAddDirs(body.add_dirs, config.allowedRoots);
  const settings = {
    ...current,
    permissionMode: pick(body.permission_mode, current.permissionMode, defaults.permissionMode),
    effort: pick(body.effort, current.effort, defaults.effort),
    model: pick(body.model, current.model, defaults.model),
    systemPrompt: pick(body.system_prompt, current.systemPrompt, null),
    mcpServers: pick(body.mcp_servers, current.mcpServers, []),
    maxTurns: pick(body.max_turns, current.maxTurns, null),
    maxBudgetUsd: pick(body.max_budget_usd, current.maxBudgetUsd, null),
    approvals: pick(body.approvals, current.approvals, defaults.approvals),
    disallowedTools: pick(body.disallowed_tools, current.disallowedTools, []),
    toolRules: pick(body.tool_rules, current.toolRules, []),
    addDirs: pick(addDirs, current.addDirs, []),
    requireCleanWorkDir: pick(body.require_clean_work_dir, current.requireCleanWorkDir, false),
  };
  const refused = [
    ...mcpServerIssues(config.agents.mcpServers, settings.mcpServers),
    ...settingIssues(agent, settings),
  ];
  if (refused.length > 0) throw new InvalidRequestError(refused);
  // As at creation, under the caller's key; and under the policy of the key whose session it is,
  // which its runs are held to (an admin's patch of a tenant's session).
  const ask = { settings, workDir: session.workDir };
  await enforcePolicy(db, config, principal.keyId, ask);
  if (session.ownerKeyId !== principal.keyId) {
    await enforcePolicy(db, config, session.ownerKeyId, ask);
  }
  // Only the columns the patch names: two patches of different fields at once both hold.
  const changes: store.SessionChanges = {};
  if (given(body, "title")) changes.title = body.title ?? null;
  if (given(body, "metadata")) changes.metadata = body.metadata ?? {};
  if (given(body, "permission_mode")) changes.permissionMode = settings.permissionMode;
  if (given(body, "effort")) changes.effort = settings.effort;
  if (given(body, "model")) changes.model = settings.model;
  if (given(body, "system_prompt")) changes.systemPrompt = settings.systemPrompt;
  if (given(body, "mcp_servers")) changes.mcpServers = settings.mcpServers;
  if (given(body, "max_turns")) changes.maxTurns = settings.maxTurns;
  if (given(body, "max_budget_usd")) changes.maxBudgetUsd = settings.maxBudgetUsd;
  if (given(body, "approvals")) changes.approvals = settings.approvals;
  if (given(body, "approval_timeout_seconds")) {
    changes.approvalTimeoutSeconds = body.approval_timeout_seconds ?? null;
  }
  if (given(body, "allowed_tools")) changes.allowedTools = body.allowed_tools ?? [];
  if (given(body, "disallowed_tools")) changes.disallowedTools = settings.disallowedTools;
  if (given(body, "tool_rules")) changes.toolRules = settings.toolRules;
  if (given(body, "add_dirs")) changes.addDirs = settings.addDirs;
  if (given(body, "require_clean_work_dir")) {
    changes.requireCleanWorkDir = settings.requireCleanWorkDir;
  }
  const row = await store.updateSession(db, id, changes);
  if (!row) throw new NotFoundError("session", id);
  return c.json(await shown(c, row), 200);
};

/** The session as `GET` shows it, with its worktree record and active run. */
async function shown(
  c: Parameters<RouteHandler<typeof routes.updateSession, AppEnv>>[0],
  row: SessionRow,
) {
  const { worktree, active } = await inOneSnapshot(c.var.db, async (tx) => {
    const [worktree, active] = await Promise.all([
      row.worktree ? getSessionWorktree(tx, row.id) : undefined,
      activeRunIds(tx, [row.id]),
    ]);
    return { worktree, active };
  });
  return toSession(row, c.var.config, { worktree, activeRunId: active.get(row.id) });
}

export const getSessionDiff: RouteHandler<typeof routes.getSessionDiff, AppEnv> = async (c) => {
  const { id } = c.req.valid("param");
  const { config, db, principal } = c.var;
  const session = await store.getSession(db, id, principal);
  if (!session) throw new NotFoundError("session", id);
  if (!session.worktree) {
    throw new DomainError(
      "not_a_worktree_session",
      `session ${id} runs in its work dir, not a worktree of its own: there is no base to diff against`,
    );
  }
  const worktree = await getSessionWorktree(db, id);
  if (!worktree) {
    throw new DomainError(
      "worktree_not_found",
      `session ${id} has no worktree yet: its first run makes it`,
    );
  }
  if (worktree.state === "removed") {
    throw new DomainError(
      "worktree_removed",
      `the worktree of session ${id} was removed${worktree.removedAt ? ` at ${worktree.removedAt.toISOString()}` : ""}`,
    );
  }
  const here = config.lease.host;
  if (worktree.host !== null && worktree.host !== here) {
    throw new DomainError(
      "worktree_elsewhere",
      `the worktree of session ${id} is on host ${worktree.host}; ask an instance there (this is ${here})`,
    );
  }
  const git = c.var.git.forSession(session.ownerKeyId, session.workDir ?? config.workDir);
  // Only a worktree in the session's repository, where its git may run.
  if (!git.holds(worktree.path)) {
    throw new DomainError(
      "worktree_not_found",
      `the worktree of session ${id} is not in its repository`,
    );
  }
  const base =
    worktree.baseRef ??
    (await git.maybe(["merge-base", "origin/HEAD", `refs/heads/worktree-${id}`]));
  if (!base) {
    throw new DomainError(
      "worktree_not_found",
      `the base commit of session ${id}'s worktree is not known`,
    );
  }
  let found: Awaited<ReturnType<typeof worktreeDiff>>;
  try {
    found = await worktreeDiff(git, worktree.path, base);
  } catch (err) {
    if (!(err instanceof GitError)) throw err;
    // What git said is the repository's to shape (its hooks, filters, config): logged, not echoed.
    c.var.logger.warn("git could not read a session's worktree for its diff", {
      session_id: id,
      error: err.stderr.trim().slice(0, 500) || err.message,
    });
    throw new DomainError(
      "worktree_not_found",
      `git could not read the worktree of session ${id}; the server's log says why`,
    );
  }
  const accept = c.req.header("accept") ?? "";
  if (/\btext\/x-diff\b/i.test(accept) && !/\bapplication\/json\b/i.test(accept)) {
    return c.body(found.diff, 200, {
      "Content-Type": "text/x-diff; charset=utf-8",
      ...(found.truncated ? { "X-Diff-Truncated": "true" } : {}),
    });
  }
  return c.json(toSessionDiff(base, found), 200);
};
