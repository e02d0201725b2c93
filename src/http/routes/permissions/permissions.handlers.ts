import type { RouteHandler } from "@hono/zod-openapi";
import { NotFoundError } from "../../../errors.js";
import type { ClientReply } from "../../../runs/approvals.js";
import { listPermissionRequests } from "../../../store/permissions.js";
import { getVisibleRun } from "../../../store/runs.js";
import type { AppEnv } from "../../context.js";
import type * as routes from "./permissions.routes.js";
import { toPermissionRequest } from "./permissions.schemas.js";

export const listPermissions: RouteHandler<typeof routes.listPermissions, AppEnv> = async (c) => {
  const { id } = c.req.valid("param");
  const { db, principal } = c.var;
  if (!(await getVisibleRun(db, id, principal))) throw new NotFoundError("run", id);
  const rows = await listPermissionRequests(db, id);
  return c.json({ data: rows.map(toPermissionRequest) }, 200);
};

export const answerPermission: RouteHandler<typeof routes.answerPermission, AppEnv> = async (c) => {
  const { id, request_id } = c.req.valid("param");
  const body = c.req.valid("json");
  const { db, principal, runs } = c.var;
  const run = await getVisibleRun(db, id, principal);
  if (!run) throw new NotFoundError("run", id);
  const reply: ClientReply =
    "answers" in body
      ? { answers: body.answers }
      : {
          decision: body.decision,
          scope: body.scope,
          updatedInput: body.updated_input,
          message: body.message,
          interrupt: body.interrupt,
        };
  const row = await runs.answerPermission(run, request_id, reply, principal.keyId);
  return c.json(toPermissionRequest(row), 200);
};
