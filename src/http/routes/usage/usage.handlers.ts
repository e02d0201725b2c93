import type { RouteHandler } from "@hono/zod-openapi";
import { budgetOf, loadPolicy } from "../../../auth/policy.js";
import { usageTotals } from "../../../store/usage.js";
import type { AppEnv } from "../../context.js";
import type * as routes from "./usage.routes.js";

export const getUsage: RouteHandler<typeof routes.getUsage, AppEnv> = async (c) => {
  const { db, config, principal } = c.var;
  const totals = await usageTotals(db, principal);
  const { keyId } = principal;
  const budget = keyId ? await budgetOf(db, keyId, await loadPolicy(db, keyId, config)) : null;
  return c.json(
    {
      ...totals,
      budget: budget && {
        max_usd: budget.maxUsd,
        spent_usd: budget.spentUsd,
        left_usd: budget.leftUsd,
        period_start: budget.periodStart.toISOString(),
      },
    },
    200,
  );
};
