import { createRequire } from "node:module";
import type { RouteHandler } from "@hono/zod-openapi";
import { findCredentials } from "../../../agents/claude/credentials.js";
import { publicErrorText } from "../../../store/errors.js";
import type { AppEnv } from "../../context.js";
import { ApiError } from "../../errors.js";
import { API_VERSION } from "../../openapi.js";
import type * as routes from "./health.routes.js";

const { version } = createRequire(import.meta.url)("../../../../package.json") as {
  version: string;
};

export const root: RouteHandler<typeof routes.root, AppEnv> = (c) =>
  c.json(
    {
      name: "agent-bridge" as const,
      version,
      api_version: API_VERSION,
      docs: "/docs",
      openapi: "/openapi.json",
    },
    200,
  );

export const healthz: RouteHandler<typeof routes.healthz, AppEnv> = (c) =>
  c.json({ status: "ok" as const }, 200);

export const readyz: RouteHandler<typeof routes.readyz, AppEnv> = async (c) => {
  const problems: string[] = [];
  const [database, claude, credentials] = await Promise.allSettled([
    c.var.database.ping(),
    c.var.claudeProbe(),
    findCredentials(c.var.config.claude.childEnv),
  ]);
  if (database.status === "rejected")
    problems.push(`database unreachable: ${publicErrorText(database.reason)}`);
  if (claude.status === "rejected") problems.push(reason(claude.reason));
  if (credentials.status === "rejected") problems.push(reason(credentials.reason));
  if (
    database.status === "rejected" ||
    claude.status === "rejected" ||
    credentials.status === "rejected"
  ) {
    throw new ApiError(503, "not_ready", problems.join("; "));
  }
  return c.json(
    {
      status: "ok" as const,
      database: c.var.database.kind,
      claude: {
        bin: c.var.config.claude.bin,
        version: claude.value,
        credentials: credentials.value,
      },
    },
    200,
  );
};

const reason = (err: unknown) => (err instanceof Error ? err.message : String(err));

export const metrics: RouteHandler<typeof routes.metrics, AppEnv> = async (c) => {
  const { registry } = c.var.metrics;
  return c.text(await registry.metrics(), 200, { "Content-Type": registry.contentType });
};
