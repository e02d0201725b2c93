import type { AgentBackend } from "../agents/agent.js";
import { type McpCatalog, unknownMcpServers } from "../agents/mcp-servers.js";
import { type AgentRegistry, AgentUnavailableError } from "../agents/registry.js";
import { InvalidRequestError, type ValidationIssue } from "../errors.js";
import type { SessionSettings } from "../session-settings.js";

// A session's agent and settings, as a request asks for them (a session, or a hook's sessions):
// the agent must be one this server runs, and each setting one the agent can honour.

/**
 * The agent; one this server does not run is the client's to fix, a field of the request like
 * any other (400 validation_failed), not the server's (503 agent_unavailable, a session's agent).
 */
export function requestedAgent(agents: AgentRegistry, name: string): AgentBackend {
  try {
    return agents.get(name);
  } catch (err) {
    if (!(err instanceof AgentUnavailableError)) throw err;
    throw new InvalidRequestError([{ location: "body", path: "agent", message: err.message }]);
  }
}

/** The body's field of each setting, for the issues an agent's settings schema finds. */
const SETTING_FIELDS: Record<keyof SessionSettings, string> = {
  permissionMode: "permission_mode",
  effort: "effort",
  model: "model",
  systemPrompt: "system_prompt",
  worktree: "worktree",
  mcpServers: "mcp_servers",
  maxTurns: "max_turns",
  maxBudgetUsd: "max_budget_usd",
  approvals: "approvals",
  disallowedTools: "disallowed_tools",
  toolRules: "tool_rules",
  addDirs: "add_dirs",
  requireCleanWorkDir: "require_clean_work_dir",
};

/** What the agent cannot honour of the settings, one issue per body field; empty when all is well. */
export function settingIssues(agent: AgentBackend, settings: SessionSettings): ValidationIssue[] {
  const parsed = agent.settings.safeParse(settings);
  if (parsed.success) return [];
  return parsed.error.issues.map((issue) => ({
    location: "body" as const,
    path: SETTING_FIELDS[issue.path[0] as keyof SessionSettings] ?? String(issue.path[0]),
    message: `the ${agent.name} agent cannot honour this: ${issue.message}`,
  }));
}

/** One issue per MCP server name the admin's file does not have; empty when it has them all. */
export function mcpServerIssues(catalog: McpCatalog, names: readonly string[]): ValidationIssue[] {
  const known = Object.keys(catalog);
  const offered =
    known.length > 0
      ? `it has ${known.map((n) => JSON.stringify(n)).join(", ")}`
      : "it has none (AGENT_BRIDGE_MCP_CONFIG is not set)";
  return unknownMcpServers(catalog, names).map((name) => ({
    location: "body" as const,
    path: "mcp_servers",
    message: `the server has no MCP server named ${JSON.stringify(name)}: ${offered}`,
  }));
}
