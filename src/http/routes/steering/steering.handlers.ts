import type { RouteHandler } from "@hono/zod-openapi";
import { checkRun, loadPolicy } from "../../../auth/policy.js";
import { DomainError, NotFoundError } from "../../../errors.js";
import { getVisibleRun } from "../../../store/runs.js";
import { getSession, sessionSettings } from "../../../store/sessions.js";
import type { AppEnv } from "../../context.js";
import type * as routes from "./steering.routes.js";

export const postRunInput: RouteHandler<typeof routes.postRunInput, AppEnv> = async (c) => {
  const { id } = c.req.valid("param");
  const body = c.req.valid("json");
  const { db, principal, runs } = c.var;
  const run = await getVisibleRun(db, id, principal);
  const session = run && (await getSession(db, run.sessionId, principal));
  if (!run || !session) throw new NotFoundError("run", id);
  const attachments = (body.attachments ?? []).map((a) => ({
    mediaType: a.media_type,
    data: a.data,
  }));
  const event = await runs.input(run, session.agent, { text: body.text, attachments });
  return c.json(event, 202);
};

export const postRunControl: RouteHandler<typeof routes.postRunControl, AppEnv> = async (c) => {
  const { id } = c.req.valid("param");
  const body = c.req.valid("json");
  const { db, principal, runs, config } = c.var;
  const run = await getVisibleRun(db, id, principal);
  const session = run && (await getSession(db, run.sessionId, principal));
  if (!run || !session) throw new NotFoundError("run", id);
  // Under the session's key's policy, as the run itself is: what it may not start with, it may
  // not switch to.
  const policy = await loadPolicy(db, session.ownerKeyId, config);
  const settings = {
    ...sessionSettings(session),
    ...(body.model === undefined ? {} : { model: body.model }),
    ...(body.permission_mode === undefined ? {} : { permissionMode: body.permission_mode }),
  };
  await checkRun(policy, { settings, workDir: session.workDir }, config);
  if (body.model !== undefined && policy.models && !policy.models.includes(body.model)) {
    throw new DomainError(
      "policy_denied",
      `the key's policy does not allow the model ${body.model}: it is not among its models (${policy.models.join(", ")})`,
    );
  }
  const event = await runs.control(run, session.agent, {
    model: body.model,
    permissionMode: body.permission_mode,
  });
  return c.json(event, 200);
};
