import type { RouteHandler } from "@hono/zod-openapi";
import { usageTotals } from "../../../store/runs.js";
import type { AppEnv } from "../../context.js";
import type * as routes from "./usage.routes.js";

export const getUsage: RouteHandler<typeof routes.getUsage, AppEnv> = async (c) =>
  c.json(await usageTotals(c.var.db, c.var.principal), 200);
