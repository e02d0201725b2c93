import { createRoute, z } from "@hono/zod-openapi";
import { SessionUsage } from "../../../events.js";
import { COST_PRECISION } from "../../../money.js";
import { problemResponses } from "../../errors.js";

export const UsageBudget = z
  .object({
    max_usd: z.number().openapi({ description: "The key's `max_budget_usd`." }),
    spent_usd: z.number().openapi({
      description: `What the key's runs that ended this month cost (those of deleted sessions too). ${COST_PRECISION}`,
    }),
    left_usd: z.number().openapi({ description: "`max_usd - spent_usd`, at least 0." }),
    period_start: z
      .string()
      .openapi({ format: "date-time", description: "The month's start (UTC)." }),
  })
  .openapi("UsageBudget");

export const UsageTotals = SessionUsage.extend({
  sessions: z
    .number()
    .int()
    .openapi({ description: "Sessions counted (deleted sessions are not)." }),
  budget: UsageBudget.nullable().openapi({
    description: "The calling key's monthly budget; null when it has no cap.",
  }),
}).openapi("UsageTotals");

export const getUsage = createRoute({
  method: "get",
  path: "/v1/usage",
  operationId: "getUsage",
  tags: ["Usage"],
  summary: "Token and cost totals over the caller's sessions (all sessions for an admin key)",
  responses: {
    200: { description: "Totals", content: { "application/json": { schema: UsageTotals } } },
    ...problemResponses(401, 429),
  },
});
