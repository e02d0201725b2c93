import { createRoute, z } from "@hono/zod-openapi";
import { SessionUsage } from "../../../events.js";
import { problemResponses } from "../../errors.js";

export const UsageTotals = SessionUsage.extend({
  sessions: z
    .number()
    .int()
    .openapi({ description: "Sessions counted (deleted sessions are not)." }),
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
