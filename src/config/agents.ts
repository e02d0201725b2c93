import { readFileSync } from "node:fs";
import { z } from "zod";
import { childEnvironment, NO_AGENT } from "../agents/child-env.js";
import { type McpCatalog, parseMcpConfig } from "../agents/mcp-servers.js";
import type { AgentPlugin, AgentSection } from "../agents/plugin.js";
import { AGENT_NAMES, AGENT_PLUGINS, type AgentName } from "../agents/registry.js";
import { bool, int, list, oneOf } from "../env-fields.js";
import { PERMISSION_MODES } from "../permission-modes.js";
import { EFFORTS, type SettingsDefaults } from "../session-settings.js";
import { ConfigError } from "./env.js";

// The agents: which of them this server runs, what every agent's runs get, and each agent's own
// section, which its plugin reads (src/agents/<name>/plugin.ts).

export const agentsEnv = {
  // The first agent of the registry's list, unless the operator names another.
  AGENT_BRIDGE_AGENT: oneOf(AGENT_NAMES).default(AGENT_NAMES[0]),
  AGENT_BRIDGE_AGENTS: list.optional(),
  AGENT_BRIDGE_PERMISSION_MODE: oneOf(PERMISSION_MODES).default("acceptEdits"),
  AGENT_BRIDGE_RUN_TIMEOUT_SECONDS: int(1).default(600),
  AGENT_BRIDGE_IDLE_TIMEOUT_SECONDS: int(1).default(300),
  AGENT_BRIDGE_APPROVAL_TIMEOUT_SECONDS: int(1).default(600),
  AGENT_BRIDGE_WORKTREE_ENABLED: bool.default(false),
  AGENT_BRIDGE_EFFORT: oneOf(EFFORTS).default("xhigh"),
  AGENT_BRIDGE_MAX_LINE_BYTES: int(10_000_000).default(16 * 1024 * 1024),
  AGENT_BRIDGE_MCP_CONFIG: z.string().min(1).optional(),
};

export interface AgentsConfig extends SettingsDefaults {
  agents: SettingsDefaults["agents"] & {
    /** The back-end of a session that names none. */
    default: AgentName;
    /** The back-ends this server runs (the default among them). */
    enabled: AgentName[];
    /** Limits of every run. */
    timeoutSeconds: number;
    idleTimeoutSeconds: number;
    /** How long a permission request waits for an answer (`approvals: "api"`). */
    approvalTimeoutSeconds: number;
    maxLineBytes: number;
    /** The MCP servers a session may name (AGENT_BRIDGE_MCP_CONFIG); empty when unset. */
    mcpServers: McpCatalog;
    /**
     * The environment of the server's own tools run for the agents (git in a session's repository,
     * file work in tenants' homes): what every agent's CLI gets, and no agent's own variables.
     */
    toolEnv: Record<string, string>;
  };
}

/** Each agent's section, by its name. */
export type AgentSections = Record<AgentName, AgentSection>;

/** Settings of the agents' that hold secrets (their `_FILE` forms are read). */
export const pluginSecrets = AGENT_PLUGINS.flatMap((plugin) => plugin.secrets);

/**
 * Each agent's section as its plugin reads it from `env` (secrets read), or the problems of its
 * settings.
 */
export function agentSections(
  env: Record<string, string>,
): { sections: AgentSections } | { issues: z.core.$ZodIssue[] } {
  const plugins: readonly AgentPlugin[] = AGENT_PLUGINS;
  const issues: z.core.$ZodIssue[] = [];
  const sections: Array<[string, AgentSection]> = [];
  for (const plugin of plugins) {
    const parsed = z.object(plugin.env).safeParse(env);
    if (parsed.success) sections.push([plugin.name, plugin.section(parsed.data, env)]);
    else issues.push(...parsed.error.issues);
  }
  if (issues.length > 0) return { issues };
  // Every plugin of the list made one.
  return { sections: Object.fromEntries(sections) as AgentSections };
}

export function agentsSection(
  e: z.infer<z.ZodObject<typeof agentsEnv>>,
  env: Record<string, string>,
  sections: AgentSections,
): AgentsConfig {
  const enabled = e.AGENT_BRIDGE_AGENTS ?? [e.AGENT_BRIDGE_AGENT];
  const known = (name: string): name is AgentName => (AGENT_NAMES as string[]).includes(name);
  if (!enabled.every(known) || !enabled.includes(e.AGENT_BRIDGE_AGENT)) {
    throw new ConfigError([
      `AGENT_BRIDGE_AGENTS: a comma-separated list of ${AGENT_NAMES.join(", ")} that includes AGENT_BRIDGE_AGENT (${e.AGENT_BRIDGE_AGENT}) (got ${JSON.stringify(enabled.join(","))})`,
    ]);
  }
  return {
    agents: {
      default: e.AGENT_BRIDGE_AGENT,
      enabled,
      permissionMode: e.AGENT_BRIDGE_PERMISSION_MODE,
      effort: e.AGENT_BRIDGE_EFFORT,
      worktreeEnabled: e.AGENT_BRIDGE_WORKTREE_ENABLED,
      models: Object.fromEntries(AGENT_NAMES.map((name) => [name, sections[name].model])),
      timeoutSeconds: e.AGENT_BRIDGE_RUN_TIMEOUT_SECONDS,
      idleTimeoutSeconds: e.AGENT_BRIDGE_IDLE_TIMEOUT_SECONDS,
      approvalTimeoutSeconds: e.AGENT_BRIDGE_APPROVAL_TIMEOUT_SECONDS,
      maxLineBytes: e.AGENT_BRIDGE_MAX_LINE_BYTES,
      mcpServers: readMcpConfig(e.AGENT_BRIDGE_MCP_CONFIG),
      toolEnv: childEnvironment(env, [], NO_AGENT),
    },
  };
}

/** The MCP servers of the admin's file; a file that cannot be read or used stops the start-up. */
function readMcpConfig(file: string | undefined): McpCatalog {
  if (file === undefined) return {};
  const where = `AGENT_BRIDGE_MCP_CONFIG: ${JSON.stringify(file)}`;
  let content: string;
  try {
    content = readFileSync(file, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    throw new ConfigError([`${where}: cannot read it (${code})`]);
  }
  const parsed = parseMcpConfig(content);
  if ("problems" in parsed) throw new ConfigError(parsed.problems.map((p) => `${where}: ${p}`));
  return parsed.catalog;
}
