import type { OpenAPIHono } from "@hono/zod-openapi";
import { Scalar } from "@scalar/hono-api-reference";
import { methodNotAllowed } from "hono/method-not-allowed";
import { requestId } from "hono/request-id";
import type { AppDeps, AppEnv } from "./http/context.js";
import { ApiError, onError, onNotFound, problemResponse } from "./http/errors.js";
import { limitBody, requireJsonBody } from "./http/middleware.js";
import { openApiDocument } from "./http/openapi.js";
import { createRouter } from "./http/router.js";
import { mountRoutes } from "./http/routes/index.js";

/** Builds the HTTP app from its dependencies; `src/index.ts` serves it, tests call it directly. */
export function createApp(deps: AppDeps): OpenAPIHono<AppEnv> {
  const app = createRouter();
  app.use(requestId());
  // Wraps everything below: turns a 404 on a path that exists for other methods into a 405.
  app.use(
    methodNotAllowed({
      app,
      onMethodNotAllowed: (c, methods) =>
        problemResponse(
          c,
          new ApiError(
            405,
            "method_not_allowed",
            `${c.req.method} is not allowed here; use ${methods.join(", ")}`,
            {
              headers: { Allow: methods.join(", ") },
            },
          ),
        ),
    }),
  );
  app.use(async (c, next) => {
    c.set("config", deps.config);
    c.set("database", deps.database);
    c.set("db", deps.database.db);
    c.set("logger", deps.logger);
    c.set("claudeProbe", deps.claudeProbe);
    await next();
  });
  app.use("/v1/*", limitBody(deps.config.bodyLimitBytes));
  app.use("/v1/*", requireJsonBody);

  mountRoutes(app);

  app.get("/openapi.json", (c) => c.json(openApiDocument()));
  app.get("/docs", Scalar({ url: "/openapi.json", pageTitle: "agent-bridge API" }));

  app.notFound(onNotFound);
  app.onError(onError);
  return app;
}
