import { z } from "@hono/zod-openapi";
import { DomainError } from "../errors.js";
import type { AgentBackend } from "./agent.js";
import { claudePlugin } from "./claude/plugin.js";
import { codexPlugin } from "./codex/plugin.js";
import type { AgentPlugin } from "./plugin.js";

// The agents this version knows: adding one is its folder and a line here.

export const AGENT_PLUGINS = [claudePlugin, codexPlugin] as const;

type NamesOf<T extends readonly AgentPlugin[]> = { -readonly [K in keyof T]: T[K]["name"] };
export const AGENT_NAMES = AGENT_PLUGINS.map((plugin) => plugin.name) as NamesOf<
  typeof AGENT_PLUGINS
>;
export const AgentName = z.enum(AGENT_NAMES).openapi("AgentName", {
  description: "The agent CLI a session runs: `claude` (Claude Code) or `codex` (OpenAI Codex).",
});
export type AgentName = z.infer<typeof AgentName>;

/** The plugin of the agent `name`; undefined for one this version does not know. */
export function pluginOf(name: string): AgentPlugin | undefined {
  return AGENT_PLUGINS.find((plugin) => plugin.name === name);
}

/** Whether a permission request of an `agent` run for `toolName` asks the user questions. */
export function isQuestion(agent: string, toolName: string): boolean {
  return pluginOf(agent)?.isQuestion(toolName) ?? false;
}

/** A session names a back-end this server does not run (AGENT_BRIDGE_AGENTS). */
export class AgentUnavailableError extends DomainError {
  constructor(readonly agent: string) {
    super("agent_unavailable", `this server does not run the ${agent} agent (AGENT_BRIDGE_AGENTS)`);
  }
}

/** The back-ends this server runs, and the one a session gets when it names none. */
export class AgentRegistry {
  private readonly byName: Map<string, AgentBackend>;

  constructor(
    backends: AgentBackend[],
    readonly defaultAgent: AgentName,
  ) {
    this.byName = new Map(backends.map((b) => [b.name, b]));
    if (!this.byName.has(defaultAgent)) {
      throw new Error(`the default agent ${defaultAgent} is not among the configured back-ends`);
    }
  }

  /** The back-end; throws AgentUnavailableError when this server does not run it. */
  get(name: string): AgentBackend {
    const backend = this.byName.get(name);
    if (!backend) throw new AgentUnavailableError(name);
    return backend;
  }

  get all(): AgentBackend[] {
    return [...this.byName.values()];
  }
}
