import { randomUUID } from "node:crypto";
import type { RouteHandler } from "@hono/zod-openapi";
import { pluginOf } from "../../../agents/registry.js";
import { enforcePolicy } from "../../../auth/policy.js";
import { DomainError, NotFoundError } from "../../../errors.js";
import { errorText } from "../../../log.js";
import { SessionExpiredError } from "../../../runs/errors.js";
import { createFork, forkPoint } from "../../../store/forks.js";
import type { SessionRow } from "../../../store/schema.js";
import * as store from "../../../store/sessions.js";
import { getSessionWorktree } from "../../../store/worktrees.js";
import { forkSessionWorktree } from "../../../worktrees/fork.js";
import { GitError } from "../../../worktrees/git.js";
import { recordSessionWorktree } from "../../../worktrees/sessions.js";
import { removeSessionWorktree } from "../../../worktrees/worktree.js";
import type { AppEnv } from "../../context.js";
import type * as routes from "./fork.routes.js";
import { toSession } from "./sessions.schemas.js";

// POST /v1/sessions/{id}/fork: a new session with the original's settings and owner, a copy of
// its agent's transcript (stored with the fork, so that what the original does next is not seen),
// and, for a worktree session, a worktree of its own made from the original's. The fork's first
// run continues the copied conversation from the fork point (agents/claude/fork.ts says how).

const atRunIssue = (message: string) => ({
  errors: [{ location: "body" as const, path: "at_run", message }],
});

/** Where the fork's conversation goes on from: the run it branches after and the message. */
async function forkOrigin(
  c: Parameters<RouteHandler<typeof routes.forkSession, AppEnv>>[0],
  session: SessionRow,
  atRun: string | undefined,
) {
  const point = await forkPoint(c.var.db, session.id, atRun);
  if (point.kind === "missing") {
    if (atRun !== undefined) {
      const message = `No run with id ${atRun} in session ${session.id}`;
      throw new DomainError("run_not_found", message, atRunIssue(message));
    }
    throw new DomainError(
      "no_fork_point",
      `session ${session.id} has no finished run to fork after`,
    );
  }
  if (point.kind === "open") {
    const message = `run ${point.run.id} has not finished (${point.run.status}): a fork branches after a finished run`;
    throw new DomainError("run_not_finished", message, {
      ...atRunIssue(message),
      activeRunId: point.run.id,
    });
  }
  if (point.resumeAt === null) {
    throw new DomainError(
      "no_fork_point",
      `neither run ${point.run.id} nor any run of session ${session.id} before it confirmed a message of the conversation: there is nothing to fork`,
    );
  }
  return {
    sessionId: session.id,
    runId: point.run.id,
    agentSessionId: session.agentSessionId ?? session.id,
    resumeAt: point.resumeAt,
  };
}

export const forkSession: RouteHandler<typeof routes.forkSession, AppEnv> = async (c) => {
  const { id } = c.req.valid("param");
  const body = c.req.valid("json");
  const { db, config, logger } = c.var;
  const session = await store.getSession(db, id, c.var.principal);
  if (!session) throw new NotFoundError("session", id);
  if (session.expiredAt) throw new SessionExpiredError(id);
  // A session of an agent this server does not run is a 503, as a message to it is.
  c.var.agents.get(session.agent);
  const plugin = pluginOf(session.agent);
  if (!plugin?.capabilities.fork) {
    throw new DomainError(
      "fork_unsupported",
      `A ${session.agent} session cannot be forked: the bridge cannot start its CLI's conversation as a copy of another's up to a given message`,
    );
  }
  const forkedFrom = await forkOrigin(c, session, body.at_run);
  // The key's policy as it is today, as a message to the fork would ask it.
  await enforcePolicy(db, config, session.ownerKeyId, {
    settings: store.sessionSettings(session),
    workDir: session.workDir,
  });

  const forkId = randomUUID();
  const git = c.var.git.forSession(session.ownerKeyId, session.workDir ?? config.workDir);
  const host = config.lease.host;
  if (session.worktree) {
    const recorded = await getSessionWorktree(db, session.id);
    if (recorded?.host && recorded.host !== host) {
      throw new DomainError(
        "worktree_elsewhere",
        `session ${session.id}'s worktree is on host ${recorded.host}, and this instance runs on ${host}: only an instance there can fork it`,
      );
    }
    try {
      await forkSessionWorktree(git, session.id, forkId, plugin.worktree);
    } catch (err) {
      if (!(err instanceof GitError)) throw err;
      // What git said is the repository's to shape (its hooks, filters, config): logged, not echoed.
      logger.warn("git could not copy a session's worktree for its fork", {
        session_id: session.id,
        error: err.message.slice(0, 1000),
      });
      throw new DomainError(
        "worktree_not_found",
        `git could not copy the worktree of session ${session.id} for its fork; the server's log says why`,
      );
    }
  }
  let row: SessionRow;
  try {
    row = await createFork(
      db,
      {
        ownerKeyId: session.ownerKeyId,
        workDir: session.workDir,
        title: body.title ?? session.title,
        agent: session.agent,
        permissionMode: session.permissionMode,
        model: session.model,
        effort: session.effort,
        systemPrompt: session.systemPrompt,
        worktree: session.worktree,
        mcpServers: session.mcpServers,
        maxTurns: session.maxTurns,
        maxBudgetUsd: session.maxBudgetUsd,
        approvals: session.approvals,
        approvalTimeoutSeconds: session.approvalTimeoutSeconds,
        allowedTools: session.allowedTools,
        disallowedTools: session.disallowedTools,
        toolRules: session.toolRules,
        addDirs: session.addDirs,
        requireCleanWorkDir: session.requireCleanWorkDir,
        metadata: body.metadata ?? session.metadata,
        forkedFrom,
      },
      session.id,
      forkId,
    );
  } catch (err) {
    if (session.worktree) {
      await removeSessionWorktree(git, forkId, { force: true }).catch((cause) =>
        logger.warn("could not remove the worktree of a fork that was not made", {
          session_id: forkId,
          error: errorText(cause),
        }),
      );
    }
    throw err;
  }
  // Its record pins the fork's runs to this host, where its worktree is.
  const worktree = session.worktree
    ? await recordSessionWorktree(db, git, forkId, host)
    : undefined;
  return c.json(toSession(row, config, { worktree }), 201, { Location: `/v1/sessions/${forkId}` });
};
