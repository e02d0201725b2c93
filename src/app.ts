import type { OpenAPIHono } from "@hono/zod-openapi";
import { Scalar } from "@scalar/hono-api-reference";
import { methodNotAllowed } from "hono/method-not-allowed";
import { requestId } from "hono/request-id";
import { RUNNER_DEFAULTS } from "./claude/runner.js";
import { createClaudeProbe } from "./claude/version.js";
import type { Config } from "./config.js";
import type { AppDeps, AppEnv } from "./http/context.js";
import { ApiError, onError, onNotFound, problemResponse } from "./http/errors.js";
import { limitBody, requireJsonBody } from "./http/middleware.js";
import { openApiDocument } from "./http/openapi.js";
import { createRouter } from "./http/router.js";
import { mountRoutes } from "./http/routes/index.js";
import type { Logger } from "./log.js";
import { RunManager } from "./runs/manager.js";
import type { DatabaseHandle } from "./store/db.js";

/** The app's dependencies as configured; the entry point and the tests both build them here. */
export function buildDeps(config: Config, database: DatabaseHandle, logger: Logger): AppDeps {
  const { claude } = config;
  const runs = new RunManager({
    db: database.db,
    logger,
    workDir: claude.workDir,
    maxConcurrent: config.runs.maxConcurrent,
    maxQueued: config.runs.maxQueued,
    runner: {
      bin: claude.bin,
      env: claude.childEnv,
      timeoutMs: claude.timeoutSeconds * 1000,
      idleTimeoutMs: claude.idleTimeoutSeconds * 1000,
      maxLineBytes: claude.maxLineBytes,
      stderrTailBytes: RUNNER_DEFAULTS.stderrTailBytes,
      killGraceMs: RUNNER_DEFAULTS.killGraceMs,
    },
  });
  return {
    config,
    database,
    logger,
    runs,
    claudeProbe: createClaudeProbe(claude.bin, claude.childEnv),
  };
}

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
    c.set("runs", deps.runs);
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
