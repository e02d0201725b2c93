import { DomainError } from "../errors.js";
import type { AgentBackend, AgentName } from "./agent.js";

/** A session names a back-end this server does not run (AGENT_BRIDGE_AGENTS). */
export class AgentUnavailableError extends DomainError {
  constructor(readonly agent: string) {
    super("agent_unavailable", `this server does not run the ${agent} agent (AGENT_BRIDGE_AGENTS)`);
  }
}

/** The back-ends this server runs, and the one a session gets when it names none. */
export class AgentRegistry {
  private readonly byName: Map<AgentName, AgentBackend>;

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
    const backend = this.byName.get(name as AgentName);
    if (!backend) throw new AgentUnavailableError(name);
    return backend;
  }

  get all(): AgentBackend[] {
    return [...this.byName.values()];
  }
}
