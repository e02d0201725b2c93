import type { RouteHandler } from "@hono/zod-openapi";
import { issueKey } from "../../../auth/keys.js";
import * as store from "../../../store/keys.js";
import type { AppEnv } from "../../context.js";
import { ApiError } from "../../errors.js";
import type * as routes from "./keys.routes.js";
import { toApiKey } from "./keys.schemas.js";

export const createKey: RouteHandler<typeof routes.createKey, AppEnv> = async (c) => {
  const body = c.req.valid("json");
  const { key, row } = await issueKey(c.var.db, body);
  return c.json({ ...toApiKey(row), key }, 201);
};

export const listKeys: RouteHandler<typeof routes.listKeys, AppEnv> = async (c) =>
  c.json({ data: (await store.listKeys(c.var.db)).map(toApiKey) }, 200);

export const revokeKey: RouteHandler<typeof routes.revokeKey, AppEnv> = async (c) => {
  const { id } = c.req.valid("param");
  const row = await store.revokeKey(c.var.db, id);
  if (!row) throw new ApiError(404, "key_not_found", `No API key with id ${id}`);
  return c.json(toApiKey(row), 200);
};
