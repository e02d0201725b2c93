import { createRoute, z } from "@hono/zod-openapi";
import { AgentName } from "../../../agents/registry.js";
import { problemResponses } from "../../errors.js";

const tags = ["Health"];

export const Health = z.object({ status: z.literal("ok") }).openapi("Health");
export const Service = z
  .object({
    name: z.literal("agent-bridge"),
    version: z.string().openapi({ description: "The server's version", example: "0.1.0" }),
    api_version: z.string().openapi({ description: "The contract's version", example: "1.0.0" }),
    docs: z.string().openapi({ example: "/docs" }),
    openapi: z.string().openapi({ example: "/openapi.json" }),
  })
  .openapi("Service");
const RunLimitsReadiness = z
  .discriminatedUnion("enabled", [
    z.object({
      enabled: z.literal(true),
      mechanism: z.literal("cgroup v1"),
      memory_mb: z.number().int().nullable().openapi({
        description: "Each run's memory limit in MiB (AGENT_BRIDGE_RUN_MEMORY_MB); null: none",
        example: 4096,
      }),
      max_processes: z.number().int().nullable().openapi({
        description:
          "Each run's limit of processes and threads (AGENT_BRIDGE_RUN_MAX_PROCESSES); null: none",
        example: 1024,
      }),
    }),
    z.object({
      enabled: z.literal(false),
      reason: z.string().openapi({
        description: "Why runs have no limits",
        example: "cgroup v2 (the unified hierarchy) is not supported yet; only cgroup v1",
      }),
    }),
  ])
  .openapi("RunLimitsReadiness", {
    description:
      "Each sandboxed run's memory and process limits (docs/security.md), or why there are none: a run that hits one ends `failed` with `memory_limit` or `process_limit`.",
  });

export const Readiness = z
  .object({
    status: z.literal("ok"),
    database: z.enum(["pglite", "postgres"]),
    default_agent: AgentName,
    agents: z
      .partialRecord(
        AgentName,
        z
          .object({
            bin: z.string(),
            version: z.string(),
            credentials: z.string().openapi({
              description:
                "What the CLI authenticates with, found without calling the API. Claude Code: a variable (`ANTHROPIC_API_KEY`, `ANTHROPIC_AUTH_TOKEN`, `CLAUDE_CODE_OAUTH_TOKEN`), a provider switch (`CLAUDE_CODE_USE_BEDROCK`, …), a login file (`.credentials.json`, `.claude.json`) or `apiKeyHelper`.",
              example: "ANTHROPIC_API_KEY",
            }),
          })
          .openapi("AgentReadiness"),
      )
      .openapi({ description: "Each agent back-end this server runs (AGENT_BRIDGE_AGENTS)." }),
    sandbox: z
      .discriminatedUnion("enabled", [
        z.object({
          enabled: z.literal(true),
          mechanism: z.literal("bubblewrap"),
          version: z.string().openapi({ example: "0.8.0" }),
          limits: RunLimitsReadiness,
        }),
        z.object({
          enabled: z.literal(false),
          reason: z.string().openapi({
            description: "Why runs are not sandboxed",
            example: "bubblewrap (bwrap) is not installed",
          }),
        }),
      ])
      .openapi("SandboxReadiness", {
        description:
          "Whether each run's CLI runs in a sandbox of its own (AGENT_BRIDGE_SANDBOX; docs/security.md): its mechanism and version, or why not.",
      }),
  })
  .openapi("Readiness");

export const root = createRoute({
  method: "get",
  path: "/",
  operationId: "service",
  tags,
  security: [],
  summary: "What this is: the service's name and version, and where its docs are",
  responses: {
    200: { description: "The service", content: { "application/json": { schema: Service } } },
  },
});

export const healthz = createRoute({
  method: "get",
  path: "/healthz",
  operationId: "healthz",
  tags,
  security: [],
  summary: "Liveness: the process is up",
  responses: { 200: { description: "Up", content: { "application/json": { schema: Health } } } },
});

export const readyz = createRoute({
  method: "get",
  path: "/readyz",
  operationId: "readyz",
  tags,
  security: [],
  summary: "Readiness: the database answers, each agent CLI runs and has credentials",
  description:
    "503 `not_ready` when any of them fails, naming each problem: a load balancer sends no traffic to an instance whose runs would all fail. A CLI without credentials (for Claude Code: no `ANTHROPIC_API_KEY` or other login) is not ready. `/healthz` stays 200, so the process is not restarted for it.",
  responses: {
    200: { description: "Ready", content: { "application/json": { schema: Readiness } } },
    ...problemResponses(503),
  },
});

export const metrics = createRoute({
  method: "get",
  path: "/metrics",
  operationId: "metrics",
  tags,
  summary: "Prometheus metrics: runs, their cost, the event log's writes, HTTP, Node",
  description:
    "Prometheus text format. Needs an admin key, unless `AGENT_BRIDGE_PUBLIC_METRICS=true` opens it to scrapers that carry none.",
  responses: {
    200: {
      description: "The metrics",
      content: { "text/plain": { schema: z.string() } },
    },
    ...problemResponses(401, 403),
  },
});
