import type { z } from "zod";
import type { ModelApi } from "../gateway/api.js";
import type { Upstream } from "../gateway/upstream.js";
import type { PriceTable } from "../prices.js";
import type { RunAs } from "../process/agent-user.js";
import type { DriverConfig } from "../process/driver/driver-config.js";
import type { WorktreeLayout } from "../worktrees/worktree.js";
import type { AgentBackend } from "./agent.js";
import type { EnvPolicy } from "./child-env.js";
import type { GatewayAccess } from "./gateway-access.js";
import type { McpCatalog } from "./mcp-servers.js";

// An agent as the bridge knows it: one object its folder exports (agents/<name>/plugin.ts) and
// the registry lists (agents/registry.ts). Configuration, the server's wiring and the run layer
// ask the plugin; none of them knows an agent by name.

/** The model API an agent calls with the operator's credential, as the gateway's upstream. */
export interface AgentUpstream extends Upstream {
  /** The variable the CLI gets its run's token in. */
  variable: string;
  /** Where the operator's credential came from (a variable's or a file's name): /readyz names it. */
  source: string;
}

/** An agent's section of the configuration (`config[name]`), built by its plugin. */
export interface AgentSection {
  bin: string;
  /** The model of a session that names none; unset: the CLI's own default. */
  model: string | undefined;
  /**
   * The environment the CLI runs with: an allow-list of this process's (the plugin's policy),
   * never the bridge's secrets, and, with an upstream, none of the operator's credentials.
   */
  childEnv: Record<string, string>;
  /**
   * Set when the operator gave the CLI's credential in the environment: the API the model gateway
   * forwards the CLI's calls to, with that credential. Unset: the CLI calls its API itself.
   */
  upstream: AgentUpstream | undefined;
  /**
   * Set when the CLI has no credential the gateway can hold and may not call its API itself: what
   * the operator must give. /readyz says so, and its runs fail before they start.
   */
  missingCredentials?: Error;
  /** The operator's files of the CLI's holding a credential the gateway holds: no run sees them. */
  secretFiles?: string[];
  /** Prices its own settings give (AGENT_BRIDGE_MODEL_PRICES goes over them). */
  prices: PriceTable;
}

/** What an agent's CLI can do, which the run layer and the routes ask before they offer it. */
export interface AgentCapabilities {
  /** Runs a message from an earlier message of the conversation (a retry needs it). */
  resumeAtMessage: boolean;
  /** Ends its turn when asked, its usage counted and its conversation intact. */
  interrupt: boolean;
  /** Asks for permission, and questions, while it runs (`approvals: "api"`). */
  approvals: boolean;
  /** Starts a new conversation from an existing one. */
  fork: boolean;
  /** Takes more input while a turn runs. */
  steering: boolean;
}

/** What the server gives each back-end it makes (app.ts). */
export interface AgentDeps {
  driver: Omit<DriverConfig, "logger" | "onSpawn">;
  /** Set: the version probe runs as the agents' user, proving that user can run the CLI too. */
  runAs?: RunAs;
  /** The MCP servers sessions may name (AGENT_BRIDGE_MCP_CONFIG). */
  mcpServers: McpCatalog;
  /** USD per million tokens, by model. */
  prices: PriceTable;
  /** Set when the section has an upstream: the CLI's calls go through the model gateway. */
  gateway?: GatewayAccess;
}

export interface AgentPlugin<
  Name extends string = string,
  Env extends z.ZodRawShape = z.ZodRawShape,
> {
  readonly name: Name;
  /**
   * Its settings in the environment, by name: the configuration parses them with every other, so
   * that start-up lists every bad value at once.
   */
  readonly env: Env;
  /** Settings of its that hold secrets, which may be read from `<NAME>_FILE` instead. */
  readonly secrets: readonly string[];
  /** Its configuration section: from its parsed settings and the environment (secrets read). */
  section(settings: z.infer<z.ZodObject<Env>>, env: Record<string, string>): AgentSection;
  /** Which of the server's variables its CLI gets. */
  readonly envPolicy: EnvPolicy;
  readonly worktree: WorktreeLayout;
  readonly capabilities: AgentCapabilities;
  /** Whether a permission request for `toolName` asks the user questions (answered with answers). */
  isQuestion(toolName: string): boolean;
  /** The model API its upstream is, as the gateway serves it. */
  gatewayApi(upstream: AgentUpstream): ModelApi;
  create(section: AgentSection, deps: AgentDeps): AgentBackend;
}
