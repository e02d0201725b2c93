import type { AgentRegistry } from "../agents/registry.js";
import type { Clock } from "../clock.js";
import type { Doorbell } from "../cluster/doorbell.js";
import type { InstanceLease } from "../cluster/lease.js";
import type { Config } from "../config.js";
import type { ModelGateway } from "../gateway/server.js";
import type { Logger } from "../log.js";
import type { Metrics } from "../metrics.js";
import type { Principal } from "../principal.js";
import type { LimitsStatus } from "../process/run-limits.js";
import type { SandboxStatus } from "../process/sandbox-start.js";
import type { TenantHomes } from "../process/tenant-homes.js";
import type { RunManager } from "../runs/manager.js";
import type { Database, DatabaseHandle } from "../store/db.js";
import type { DebugCapture } from "../telemetry/capture.js";
import type { Tracing } from "../telemetry/tracing.js";
import type { CheckoutCache } from "../worktrees/checkout-cache.js";
import type { GitRunner } from "../worktrees/git.js";
import type { StreamLimiter } from "./streams.js";

/** A sandbox, with its runs' memory and process limits; or why there is none. */
export type SandboxReadiness =
  | (Extract<SandboxStatus, { enabled: true }> & { limits: LimitsStatus })
  | Extract<SandboxStatus, { enabled: false }>;

/** The app's dependencies; tests build their own and pass them to `createApp`. */
export interface AppDeps {
  config: Config;
  database: DatabaseHandle;
  logger: Logger;
  /** The agent back-ends this server runs. */
  agents: AgentRegistry;
  runs: RunManager;
  /** This process as an instance on the database (started by src/index.ts). */
  lease: InstanceLease;
  /** Rings when other instances store events of followed runs or post commands (src/cluster/). */
  doorbell: Doorbell;
  metrics: Metrics;
  /** Open event streams per key. */
  streams: StreamLimiter;
  /** Whether each run gets a sandbox of its own (AGENT_BRIDGE_SANDBOX), for /readyz. */
  sandbox: SandboxReadiness;
  /** Set when the agents run as another OS user (AGENT_BRIDGE_AGENT_USER). */
  homes?: TenantHomes;
  /** The server's git in the sessions' repositories (src/worktrees/git.ts). */
  git: GitRunner;
  /** The server's caches of pull requests' heads (a checkout hook's fetch). */
  checkouts: CheckoutCache;
  /** The model APIs as this instance serves them to its runs' CLIs (src/gateway/). */
  gateway: ModelGateway;
  /** Spans of requests and runs (OTEL_EXPORTER_OTLP_ENDPOINT); off by default. */
  tracing: Tracing;
  /** Set: runs' raw CLI output and events go to files (AGENT_BRIDGE_DEBUG_CAPTURE). */
  capture?: DebugCapture;
  /**
   * The time of the lease's renewals, the doorbell's polls, approvals' timeouts and the workers
   * `buildSweeper` and `buildHookWorkers` make (the real clock but in tests).
   */
  clock: Clock;
}

/** What a handler finds on its context: the app's dependencies and the request's id. */
export interface AppEnv {
  Variables: AppDeps & {
    db: Database;
    requestId: string;
    /** Set by `authenticate` (`authenticateCounted` on /v1) on every /v1 route. */
    principal: Principal;
    /**
     * Whether the request's token was taken from its key's bucket, where its authentication took
     * it (`authenticateCounted`); unset where the rate limit is still to take it.
     */
    requestCounted?: boolean;
  };
}
