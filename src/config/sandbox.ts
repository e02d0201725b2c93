import path from "node:path";
import { z } from "zod";
import { int, oneOf } from "../env-fields.js";
import type { AgentUserConfig } from "../process/agent-user.js";
import { SANDBOX_MODES } from "../process/sandbox-modes.js";
import type { SandboxConfig } from "../process/sandbox-start.js";

// Where the agents run: as which OS user, in which sandbox, with which limits.

export const sandboxEnv = {
  AGENT_BRIDGE_AGENT_USER: z.string().min(1).optional(),
  AGENT_BRIDGE_AGENT_HOMES_DIR: z.string().min(1).optional(),
  AGENT_BRIDGE_TENANT_GID_BASE: int(1000, 4_000_000_000).default(2_000_000_000),
  // Above the ranges systemd and /etc/subuid hand out, below 2^31 (some tools take ids as signed).
  AGENT_BRIDGE_TENANT_UID_BASE: int(1000, 4_000_000_000).default(2_100_000_000),
  AGENT_BRIDGE_MAX_TENANTS: int(1, 2_147_483_647).default(1_000_000),
  AGENT_BRIDGE_SANDBOX: oneOf(SANDBOX_MODES).default("auto"),
  AGENT_BRIDGE_SANDBOX_TMP_MB: int(1, 1_048_576).default(512),
  AGENT_BRIDGE_RUN_MEMORY_MB: int(0, 1_048_576).default(4096),
  AGENT_BRIDGE_RUN_MAX_PROCESSES: int(0, 4_194_304).default(1024),
};

export interface IsolationConfig {
  /** Set: every agent runs as this OS user (by name or uid), in a HOME of its tenant's. */
  agentUser: AgentUserConfig | undefined;
  /** Each run in a sandbox of its own (src/process/sandbox.ts). */
  sandbox: SandboxConfig;
}

export function sandboxSection(
  e: z.infer<z.ZodObject<typeof sandboxEnv>>,
  where: {
    dataDir: string;
    /** The server's own files besides the data dir and the agents' homes, hidden from runs. */
    hidden: string[];
    searchPath: string;
  },
): IsolationConfig {
  const homesDir = e.AGENT_BRIDGE_AGENT_USER
    ? path.resolve(e.AGENT_BRIDGE_AGENT_HOMES_DIR ?? path.join(where.dataDir, "homes"))
    : undefined;
  return {
    agentUser:
      e.AGENT_BRIDGE_AGENT_USER && homesDir
        ? {
            spec: e.AGENT_BRIDGE_AGENT_USER,
            homesDir,
            uidBase: e.AGENT_BRIDGE_TENANT_UID_BASE,
            gidBase: e.AGENT_BRIDGE_TENANT_GID_BASE,
            maxTenants: e.AGENT_BRIDGE_MAX_TENANTS,
          }
        : undefined,
    sandbox: {
      mode: e.AGENT_BRIDGE_SANDBOX,
      tmpBytes: e.AGENT_BRIDGE_SANDBOX_TMP_MB * 1024 * 1024,
      limits: {
        memoryBytes: e.AGENT_BRIDGE_RUN_MEMORY_MB * 1024 * 1024,
        maxProcesses: e.AGENT_BRIDGE_RUN_MAX_PROCESSES,
      },
      searchPath: where.searchPath,
      hidden: [where.dataDir, ...(homesDir ? [homesDir] : []), ...where.hidden],
    },
  };
}
