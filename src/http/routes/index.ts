import type { OpenAPIHono } from "@hono/zod-openapi";
import type { AppEnv } from "../context.js";
import { conversationRouter } from "./conversation/conversation.index.js";
import { feedRouter } from "./feed/feed.index.js";
import { healthRouter } from "./health/health.index.js";
import { hooksRouter } from "./hooks/hooks.index.js";
import { keysRouter } from "./keys/keys.index.js";
import { permissionsRouter } from "./permissions/permissions.index.js";
import { runsRouter } from "./runs/runs.index.js";
import { sessionsRouter } from "./sessions/sessions.index.js";
import { steeringRouter } from "./steering/steering.index.js";
import { usageRouter } from "./usage/usage.index.js";

/** Every documented route; the same list builds the app and its OpenAPI document. */
export function mountRoutes(app: OpenAPIHono<AppEnv>) {
  return app
    .route("/", healthRouter)
    .route("/", sessionsRouter)
    .route("/", runsRouter)
    .route("/", conversationRouter)
    .route("/", permissionsRouter)
    .route("/", steeringRouter)
    .route("/", usageRouter)
    .route("/", keysRouter)
    .route("/", hooksRouter)
    .route("/", feedRouter);
}
