import { hostname } from "node:os";
import { z } from "zod";
import { int, oneOf } from "../env-fields.js";
import { ConfigError } from "./env.js";

// How many runs, for how long, and how instances sharing a database hold and follow them.

export const runsEnv = {
  AGENT_BRIDGE_MAX_CONCURRENT_RUNS: int(1).default(4),
  AGENT_BRIDGE_MAX_QUEUED_RUNS: int(0).default(32),
  AGENT_BRIDGE_MAX_RUNS_PER_KEY: int(1).default(8),
  AGENT_BRIDGE_SHUTDOWN_GRACE_SECONDS: int(0).default(30),
  AGENT_BRIDGE_DB_OUTAGE_SECONDS: int(1).default(30),
  AGENT_BRIDGE_SSE_KEEPALIVE_SECONDS: int(1).default(15),
  AGENT_BRIDGE_LEASE_SECONDS: int(2).default(20),
  AGENT_BRIDGE_LEASE_RENEW_SECONDS: int(1).default(5),
  AGENT_BRIDGE_HOST_ID: z.string().min(1).max(255).optional(),
  AGENT_BRIDGE_FOLLOW: oneOf(["notify", "poll"] as const).default("notify"),
  AGENT_BRIDGE_FOLLOW_POLL_MS: int(50).default(500),
  AGENT_BRIDGE_SESSION_TTL_SECONDS: int(1).default(259_200),
  AGENT_BRIDGE_SESSION_SWEEP_INTERVAL_SECONDS: int(1).default(300),
  AGENT_BRIDGE_FEED_RETENTION_SECONDS: int(1).default(86_400),
};

export interface RunsConfig {
  runs: {
    maxConcurrent: number;
    /** Runs (running and queued) one key may have at once. */
    maxPerKey: number;
    maxQueued: number;
    /** How long running runs may go on after SIGTERM before they are stopped. */
    shutdownGraceMs: number;
    /** How long a run waits for an unreachable database before it fails (nothing is lost before). */
    dbOutageBoundMs: number;
    keepAliveMs: number;
  };
  /**
   * This instance's lease on the database (src/cluster/lease.ts), and the host it says it runs
   * on: the machine whose disk holds the worktrees it makes.
   */
  lease: { leaseMs: number; renewMs: number; host: string };
  /**
   * How a run's followers and owner on other instances learn of new events and commands:
   * Postgres LISTEN/NOTIFY, or polling every `pollMs` where LISTEN does not work (src/cluster/).
   */
  follow: { mode: "notify" | "poll"; pollMs: number };
  sessions: {
    /** Idle time after which the sweep expires a session (and removes its worktree). */
    ttlMs: number;
    sweepIntervalMs: number;
  };
  /** How long the live feed (GET /v1/events) keeps its events; the sweep prunes older ones. */
  feed: { retentionMs: number };
}

export function runsSection(e: z.infer<z.ZodObject<typeof runsEnv>>): RunsConfig {
  if (e.AGENT_BRIDGE_LEASE_RENEW_SECONDS >= e.AGENT_BRIDGE_LEASE_SECONDS) {
    throw new ConfigError([
      `AGENT_BRIDGE_LEASE_RENEW_SECONDS: must be less than AGENT_BRIDGE_LEASE_SECONDS (${e.AGENT_BRIDGE_LEASE_SECONDS}), or a lease expires between renewals (got ${e.AGENT_BRIDGE_LEASE_RENEW_SECONDS})`,
    ]);
  }
  return {
    runs: {
      maxPerKey: e.AGENT_BRIDGE_MAX_RUNS_PER_KEY,
      maxConcurrent: e.AGENT_BRIDGE_MAX_CONCURRENT_RUNS,
      maxQueued: e.AGENT_BRIDGE_MAX_QUEUED_RUNS,
      shutdownGraceMs: e.AGENT_BRIDGE_SHUTDOWN_GRACE_SECONDS * 1000,
      dbOutageBoundMs: e.AGENT_BRIDGE_DB_OUTAGE_SECONDS * 1000,
      keepAliveMs: e.AGENT_BRIDGE_SSE_KEEPALIVE_SECONDS * 1000,
    },
    lease: {
      leaseMs: e.AGENT_BRIDGE_LEASE_SECONDS * 1000,
      renewMs: e.AGENT_BRIDGE_LEASE_RENEW_SECONDS * 1000,
      host: e.AGENT_BRIDGE_HOST_ID ?? hostname(),
    },
    follow: { mode: e.AGENT_BRIDGE_FOLLOW, pollMs: e.AGENT_BRIDGE_FOLLOW_POLL_MS },
    sessions: {
      ttlMs: e.AGENT_BRIDGE_SESSION_TTL_SECONDS * 1000,
      sweepIntervalMs: e.AGENT_BRIDGE_SESSION_SWEEP_INTERVAL_SECONDS * 1000,
    },
    feed: { retentionMs: e.AGENT_BRIDGE_FEED_RETENTION_SECONDS * 1000 },
  };
}
