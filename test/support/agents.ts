import type { AgentName } from "../../src/agents/registry.js";
import { BACKENDS, type Backend } from "./db.js";
import { type FakeCli, type FakeScenario, fakeCli } from "./fake-cli.js";
import { replyDeltas } from "./fake-dialects.js";

// The agent back-ends the run-level tests run for. Claude on every configured database; codex on
// PGlite only: what depends on the database is the same code for both back-ends, and the suite's
// time is bound by CPU (each case starts servers, databases and CLIs).

export interface AgentCase {
  agent: AgentName;
  db: Backend;
  /** The fake CLI of this agent, playing `scenario` in its dialect; its bridgeEnv selects the agent. */
  fake(scenario: FakeScenario): Promise<FakeCli>;
  /** The text of each `text_delta` that a streamed reply of `parts` gives. */
  deltas(parts: string[]): string[];
  /** Whether a start of the CLI (its arguments) resumed the agent's session. */
  resumed(args: string[]): boolean;
}

function agentCase(agent: AgentName, db: Backend): AgentCase {
  return {
    agent,
    db,
    fake: (scenario) => fakeCli(scenario, agent),
    deltas: (parts) => replyDeltas(agent, parts),
    resumed: (args) => (agent === "claude" ? args.includes("--resume") : args[1] === "resume"),
  };
}

export const agentMatrix: AgentCase[] = [
  ...BACKENDS.map((db) => agentCase("claude", db)),
  agentCase("codex", "pglite"),
];

/**
 * The agent cases for tests that start servers on `targets` (serverDatabases().targets), each with
 * its target's database maker: claude on each, codex on PGlite.
 */
export function agentTargets<T>(targets: [Backend, T][]): (AgentCase & { database: T })[] {
  return agentMatrix.flatMap((agent) =>
    targets.filter(([db]) => db === agent.db).map(([, database]) => ({ ...agent, database })),
  );
}
