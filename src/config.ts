import path from "node:path";
import { z } from "zod";
import type { AuthConfig } from "./auth/bootstrap.js";
import {
  type AgentSections,
  type AgentsConfig,
  agentSections,
  agentsEnv,
  agentsSection,
  pluginSecrets,
} from "./config/agents.js";
import { authEnv, authSection } from "./config/auth.js";
import { type DatabaseConfig, databaseEnv, databaseSection } from "./config/database.js";
import {
  ConfigError,
  presentVariables,
  problemLines,
  readSecretFiles,
  renameDeprecated,
} from "./config/env.js";
import { gatewayEnv, pricesSection } from "./config/gateway.js";
import { hooksEnv, hooksSection } from "./config/hooks.js";
import { type RunsConfig, runsEnv, runsSection } from "./config/runs.js";
import { type IsolationConfig, sandboxEnv, sandboxSection } from "./config/sandbox.js";
import { type ServerConfig, serverEnv, serverSection } from "./config/server.js";
import { type TelemetryConfig, telemetryEnv, telemetrySection } from "./config/telemetry.js";
import type { HooksConfig } from "./hooks/hooks-config.js";
import type { PriceTable } from "./prices.js";

// The one reader of process.env. Everything the service can be told from outside is listed in
// the sections of src/config/ (and each agent's in its plugin), parsed once at start-up; a bad
// value stops the process with one line per problem.

export { databaseTarget } from "./config/database.js";
export { ConfigError } from "./config/env.js";

const EnvSchema = z.object({
  ...serverEnv,
  ...databaseEnv,
  ...authEnv,
  ...runsEnv,
  ...hooksEnv,
  ...agentsEnv,
  ...gatewayEnv,
  ...sandboxEnv,
  ...telemetryEnv,
});

/** Settings that hold secrets, besides the agents' (their plugins name them). */
const SECRET_SETTINGS = ["DATABASE_URL", "AGENT_BRIDGE_API_KEY", ...pluginSecrets];

export type Config = ServerConfig &
  DatabaseConfig &
  RunsConfig &
  AgentsConfig &
  TelemetryConfig &
  IsolationConfig &
  AgentSections & {
    auth: AuthConfig;
    hooks: HooksConfig;
    /**
     * USD per million tokens by model: the built-in table, with the agents' own price settings
     * (AGENT_BRIDGE_CODEX_PRICES) and then AGENT_BRIDGE_MODEL_PRICES over it.
     */
    prices: PriceTable;
    /** Old names of settings that were set (each line says the new name), for the start-up log. */
    deprecated: string[];
  };

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const secrets = readSecretFiles(presentVariables(env), SECRET_SETTINGS);
  const { env: present, deprecated, setAs } = renameDeprecated(secrets.env);
  const parsed = EnvSchema.safeParse(present);
  const agents = agentSections(present);
  const issues = [
    ...(parsed.success ? [] : parsed.error.issues),
    ...("issues" in agents ? agents.issues : []),
  ];
  if (!parsed.success || "issues" in agents) {
    throw new ConfigError(problemLines(issues, present, setAs, SECRET_SETTINGS));
  }
  const e = parsed.data;
  const server = serverSection(e);
  const auth = authSection(e, server);
  const hooks = hooksSection(e);
  const runs = runsSection(e);
  const shared = agentsSection(e, present, agents.sections);
  const telemetry = telemetrySection(e);
  const isolation = sandboxSection(e, {
    dataDir: server.dataDir,
    hidden: [
      ...(telemetry.debugCaptureDir ? [telemetry.debugCaptureDir] : []),
      ...(e.AGENT_BRIDGE_MCP_CONFIG ? [path.resolve(e.AGENT_BRIDGE_MCP_CONFIG)] : []),
      ...secrets.files,
      ...Object.values(agents.sections).flatMap((section) => section.secretFiles ?? []),
      ...(present.HOME ? [path.resolve(present.HOME)] : []),
    ],
    searchPath: present.PATH ?? "/usr/local/bin:/usr/bin:/bin",
  });
  const sections = agents.sections;
  return {
    ...server,
    ...databaseSection(e),
    auth,
    ...runs,
    hooks,
    deprecated,
    ...shared,
    prices: pricesSection(
      e,
      Object.values(sections).map((section) => section.prices),
    ),
    ...sections,
    ...telemetry,
    ...isolation,
  };
}
