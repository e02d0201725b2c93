import type { AgentRegistry } from "../agents/registry.js";
import type { RunGate } from "../auth/policy.js";
import type { Clock } from "../clock.js";
import type { Logger } from "../log.js";
import type { Metrics } from "../metrics.js";
import type { TenantHomes } from "../process/tenant-homes.js";
import type { Database } from "../store/db.js";
import type { DebugCapture } from "../telemetry/capture.js";
import type { Tracing } from "../telemetry/tracing.js";
import type { CheckoutCache } from "../worktrees/checkout-cache.js";
import type { GitRunner } from "../worktrees/git.js";
import type { ActiveRun } from "./active-run.js";
import type { Admission } from "./admission.js";
import type { Approvals } from "./approvals.js";
import type { ClusterPort } from "./cluster-port.js";
import type { Execution } from "./execution.js";
import type { CompletionRecorder, RunTransactionHook } from "./recording.js";
import type { RunLog } from "./run-log.js";

export interface RunManagerOptions {
  db: Database;
  /** Where the event logs are written (DatabaseHandle.eventsDb). */
  eventsDb: Database;
  logger: Logger;
  agents: AgentRegistry;
  /** Time between SIGTERM and SIGKILL when a group left by an earlier process is stopped. */
  killGraceMs: number;
  /** How long a permission request waits when its session sets no timeout. */
  approvalTimeoutSeconds: number;
  /** Times that wait (the real clock by default). */
  clock?: Clock;
  workDir: string;
  maxConcurrent: number;
  maxQueued: number;
  /** Runs (running, queued and waiting) one API key may have at once. */
  maxPerKey: number;
  /** How long a run's writes wait for an unreachable database before the run fails. */
  dbOutageBoundMs: number;
  metrics: Metrics;
  /** Whether the session's key may run now, and what a run may spend. */
  gate: RunGate;
  /** Set: the agents run as another OS user, each tenant in a HOME of its own. */
  homes?: TenantHomes;
  /** Runs git in a worktree session's repository as its tenant. */
  git: GitRunner;
  /** Where pull requests' heads are fetched, by the server, before a tenant takes them. */
  checkouts: CheckoutCache;
  /** Work that joins each run's transactions (the callback outbox's). */
  transactionHooks: readonly RunTransactionHook[];
  /** The id of this instance (src/cluster/), written on each run it admits. */
  instanceId: () => string;
  /** The host this instance runs on: worktree sessions' runs run on theirs. */
  host: string;
  /** The other instances on the database: their queue, their runs (src/cluster/port.ts). */
  cluster: ClusterPort;
  /** Spans of runs, when tracing is on. */
  tracing: Tracing;
  /** Set: each run's raw CLI output and events are written to files (AGENT_BRIDGE_DEBUG_CAPTURE). */
  capture?: DebugCapture;
}

/** The parts the run manager is made of, which its single-job modules share. */
export interface RunParts {
  readonly opts: RunManagerOptions;
  /** The runs of this process: their slots, queue and sessions' lines. */
  readonly admission: Admission<ActiveRun>;
  readonly execution: Execution;
  readonly recorder: CompletionRecorder;
  readonly approvals: Approvals;
  /** A new log for a run's events. */
  logFor(runId: string): RunLog;
}
