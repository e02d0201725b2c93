import type { RouteHandler } from "@hono/zod-openapi";
import { getActiveRun } from "../../../store/runs.js";
import * as store from "../../../store/sessions.js";
import type { AppEnv } from "../../context.js";
import { decodeCursor, encodeCursor } from "../../cursor.js";
import { ApiError } from "../../errors.js";
import type * as routes from "./sessions.routes.js";
import { toSession } from "./sessions.schemas.js";

const notFound = (id: string) => new ApiError(404, "session_not_found", `No session with id ${id}`);

export const createSession: RouteHandler<typeof routes.createSession, AppEnv> = async (c) => {
  const body = c.req.valid("json");
  const { claude } = c.var.config;
  const row = await store.createSession(c.var.db, {
    title: body.title ?? null,
    permissionMode: body.permission_mode ?? claude.permissionMode,
    model: body.model ?? claude.model ?? null,
    effort: body.effort ?? claude.effort,
    systemPrompt: body.system_prompt ?? null,
    worktree: body.worktree ?? claude.worktreeEnabled,
    metadata: body.metadata ?? {},
  });
  return c.json(toSession(row), 201, { Location: `/v1/sessions/${row.id}` });
};

export const listSessions: RouteHandler<typeof routes.listSessions, AppEnv> = async (c) => {
  const { limit, cursor } = c.req.valid("query");
  const after = cursor === undefined ? undefined : decodeCursor(cursor);
  // One row more than asked tells whether another page exists.
  const rows = await store.listSessions(c.var.db, { limit: limit + 1, after });
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  return c.json(
    {
      data: page.map(toSession),
      next_cursor:
        rows.length > limit && last
          ? encodeCursor({ createdAt: last.createdAt, id: last.id })
          : null,
    },
    200,
  );
};

export const getSession: RouteHandler<typeof routes.getSession, AppEnv> = async (c) => {
  const { id } = c.req.valid("param");
  const row = await store.getSession(c.var.db, id);
  if (!row) throw notFound(id);
  return c.json(toSession(row), 200);
};

export const deleteSession: RouteHandler<typeof routes.deleteSession, AppEnv> = async (c) => {
  const { id } = c.req.valid("param");
  // A run of the session is stopped first, so that no CLI outlives the rows it writes to.
  const active = await getActiveRun(c.var.db, id);
  if (active) await c.var.runs.cancel(active.id).catch(() => {});
  if (!(await store.deleteSession(c.var.db, id))) throw notFound(id);
  return c.body(null, 204);
};
