import type { RouteHandler } from "@hono/zod-openapi";
import type { AgentBackend, AgentReadiness } from "../../../agents/agent.js";
import { DomainError } from "../../../errors.js";
import { publicErrorText } from "../../../store/errors.js";
import { API_VERSION, SERVER_VERSION as version } from "../../../version.js";
import type { AppEnv } from "../../context.js";
import type * as routes from "./health.routes.js";

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
  const backends = c.var.agents.all;
  const [database, ...agents] = await Promise.allSettled([
    c.var.database.ping(),
    ...backends.map((b) => b.ready()),
  ]);
  const problems: string[] = [];
  if (database?.status === "rejected")
    problems.push(`database unreachable: ${publicErrorText(database.reason)}`);
  const ready: Record<string, AgentReadiness> = {};
  agents.forEach((result, i) => {
    const name = (backends[i] as AgentBackend).name;
    if (result.status === "fulfilled") ready[name] = result.value as AgentReadiness;
    else problems.push(reason(result.reason));
  });
  if (problems.length > 0) throw new DomainError("not_ready", problems.join("; "));
  return c.json(
    {
      status: "ok" as const,
      database: c.var.database.kind,
      default_agent: c.var.agents.defaultAgent,
      agents: ready,
      sandbox: c.var.sandbox,
    },
    200,
  );
};

const reason = (err: unknown) => (err instanceof Error ? err.message : String(err));

export const metrics: RouteHandler<typeof routes.metrics, AppEnv> = async (c) => {
  const { registry } = c.var.metrics;
  return c.text(await registry.metrics(), 200, { "Content-Type": registry.contentType });
};
