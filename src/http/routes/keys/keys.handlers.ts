import type { RouteHandler } from "@hono/zod-openapi";
import { issueKey } from "../../../auth/keys.js";
import { type PolicyInput, PolicyInputError, policyColumns } from "../../../auth/policy.js";
import type { Config } from "../../../config.js";
import { InvalidRequestError, NotFoundError } from "../../../errors.js";
import { tenantsUnsandboxed } from "../../../process/sandbox-start.js";
import * as store from "../../../store/keys.js";
import type { AppEnv } from "../../context.js";
import type * as routes from "./keys.routes.js";
import { toApiKey } from "./keys.schemas.js";

/** The policy's columns, or a 400 naming the field that cannot be stored. */
async function policyOrRefuse(input: PolicyInput, config: Config) {
  try {
    return await policyColumns(input, config);
  } catch (err) {
    if (!(err instanceof PolicyInputError)) throw err;
    throw new InvalidRequestError([{ location: "body", path: err.field, message: err.message }]);
  }
}

export const createKey: RouteHandler<typeof routes.createKey, AppEnv> = async (c) => {
  const { name, admin, ...policy } = c.req.valid("json");
  const columns = await policyOrRefuse(policy, c.var.config);
  // The next start would refuse a second tenant without a sandbox; so does this one, now.
  const keys = (await store.countActiveKeys(c.var.db)) + 1;
  const unsandboxed = tenantsUnsandboxed(c.var.sandbox, c.var.config.sandbox.mode, keys);
  if (unsandboxed) throw unsandboxed;
  const { key, row } = await issueKey(c.var.db, { name, admin, ...columns });
  return c.json({ ...toApiKey(row, c.var.config), key }, 201);
};

export const listKeys: RouteHandler<typeof routes.listKeys, AppEnv> = async (c) =>
  c.json({ data: (await store.listKeys(c.var.db)).map((row) => toApiKey(row, c.var.config)) }, 200);

export const updateKey: RouteHandler<typeof routes.updateKey, AppEnv> = async (c) => {
  const { id } = c.req.valid("param");
  const columns = await policyOrRefuse(c.req.valid("json"), c.var.config);
  const row = await store.updateKeyPolicy(c.var.db, id, columns);
  if (!row) throw new NotFoundError("key", id);
  return c.json(toApiKey(row, c.var.config), 200);
};

export const revokeKey: RouteHandler<typeof routes.revokeKey, AppEnv> = async (c) => {
  const { id } = c.req.valid("param");
  const row = await store.revokeKey(c.var.db, id);
  if (!row) throw new NotFoundError("key", id);
  return c.json(toApiKey(row, c.var.config), 200);
};
