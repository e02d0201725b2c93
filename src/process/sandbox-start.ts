import { DomainError } from "../errors.js";
import type { Logger } from "../log.js";
import type { AgentUserConfig } from "./agent-user.js";
import { findBubblewrap } from "./bubblewrap.js";
import type { LimitsConfig } from "./run-limits.js";
import { Sandbox } from "./sandbox.js";
import type { SandboxMode } from "./sandbox-modes.js";

// Whether this server sandboxes its runs, decided once at start-up from AGENT_BRIDGE_SANDBOX and
// what the machine offers; and when it must not start (or take more tenants) without a sandbox.

/** What `/readyz` shows of the sandbox. */
export type SandboxStatus =
  | { enabled: true; mechanism: "bubblewrap"; version: string }
  | { enabled: false; reason: string };

/**
 * Why the server cannot start with the sandbox it was asked for; one line for the operator. A run
 * (or a key) that would need the sandbox is refused with it too.
 */
export class SandboxError extends DomainError {
  constructor(message: string) {
    super("sandbox_required", message);
  }
}

/** Each run in a sandbox of its own: its configuration section. */
export interface SandboxConfig {
  mode: SandboxMode;
  /** Size of each run's private /tmp and /dev/shm. */
  tmpBytes: number;
  /** Each sandboxed run's memory and process limits; 0: none (src/process/run-limits.ts). */
  limits: LimitsConfig;
  /** Where bubblewrap is looked for: the server's PATH. */
  searchPath: string;
  /**
   * What is the server's and no run may see: its data dir, the agents' homes, the debug
   * capture, the files its secrets and MCP servers were read from, its HOME.
   */
  hidden: string[];
}

/** What to do where the sandbox cannot be made. */
const INSTALL = "install them (Debian: apt-get install bubblewrap socat)";

/**
 * Why agents of `keys` API keys (several tenants) must not run here: `auto` found no sandbox, and
 * without one each tenant's agent can reach the others' work. Undefined when they may: a sandbox,
 * one key (a set-up of one user), or AGENT_BRIDGE_SANDBOX=off (the operator accepts it).
 */
export function tenantsUnsandboxed(
  status: SandboxStatus,
  mode: SandboxMode,
  keys: number,
): SandboxError | undefined {
  if (status.enabled || mode === "off" || keys <= 1) return undefined;
  return new SandboxError(
    `${keys} API keys could run agents here, but runs cannot be sandboxed: ${status.reason}; ${INSTALL}, or set AGENT_BRIDGE_SANDBOX=off to run the agents of several tenants without one`,
  );
}

/**
 * The sandbox this server runs its agents in, as AGENT_BRIDGE_SANDBOX asks: none when off, or when
 * `auto` finds bubblewrap unusable on a set-up of one user. Throws SandboxError when it must not
 * start without one: `on`, or `auto` with an agent user (agents of several tenants on one machine).
 */
export function startSandbox(
  config: {
    sandbox: SandboxConfig;
    /** Set: agents of several tenants run on this machine. */
    agentUser: AgentUserConfig | undefined;
    /** Real paths a session's work_dir must lie in. */
    allowedRoots: string[];
  },
  logger: Logger,
): { sandbox?: Sandbox; status: SandboxStatus } {
  const { mode, searchPath, tmpBytes, hidden } = config.sandbox;
  if (mode === "off") return { status: { enabled: false, reason: "AGENT_BRIDGE_SANDBOX=off" } };
  const found = findBubblewrap(searchPath);
  if (typeof found === "string") {
    if (mode === "on") {
      throw new SandboxError(
        `AGENT_BRIDGE_SANDBOX=on, but runs cannot be sandboxed: ${found}; ${INSTALL}, or set AGENT_BRIDGE_SANDBOX=auto to run without one where it is missing`,
      );
    }
    if (config.agentUser) {
      throw new SandboxError(
        `AGENT_BRIDGE_AGENT_USER is set (agents of several tenants on this machine), but runs cannot be sandboxed: ${found}; ${INSTALL}, or set AGENT_BRIDGE_SANDBOX=off to run them without a sandbox`,
      );
    }
    logger.warn("runs are not sandboxed", { reason: found });
    return { status: { enabled: false, reason: found } };
  }
  return {
    sandbox: new Sandbox(found, { hidden, roots: config.allowedRoots, tmpBytes }),
    status: { enabled: true, mechanism: "bubblewrap", version: found.version },
  };
}
