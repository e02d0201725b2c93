import { sql } from "drizzle-orm";
import {
  bigint,
  boolean,
  customType,
  doublePrecision,
  index,
  integer,
  jsonb,
  numeric,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from "drizzle-orm/pg-core";
import { COST_DECIMALS } from "../money.js";

// Timestamps are written from JS (millisecond precision) rather than defaultNow(), so that a
// value read back compares equal to the one used in a paging cursor.
const ts = (name: string) => timestamp(name, { withTimezone: true, mode: "date" });
const bytea = customType<{ data: Buffer; driverData: Uint8Array }>({
  dataType: () => "bytea",
  // postgres.js hands back a Buffer, PGlite a Uint8Array.
  fromDriver: (value) => Buffer.from(value),
});
const tokens = (name: string) => bigint(name, { mode: "number" }).notNull().default(0);
/**
 * An amount of USD: a decimal to COST_DECIMALS places, so that the sums SQL makes of it (a
 * session's, a key's month, /v1/usage) are exact, where doubles drifted (0.1 + 0.2). Read as a JS
 * number, which holds such an amount exactly up to about $100 000.
 */
const usd = (name: string) =>
  numeric(name, { precision: 10 + COST_DECIMALS, scale: COST_DECIMALS, mode: "number" });

/** Token and cost totals; a session adds up its runs' usage here. */
const usageColumns = () => ({
  inputTokens: tokens("input_tokens"),
  outputTokens: tokens("output_tokens"),
  cacheReadTokens: tokens("cache_read_tokens"),
  cacheCreationTokens: tokens("cache_creation_tokens"),
  costUsd: usd("cost_usd").notNull().default(0),
  numTurns: integer("num_turns").notNull().default(0),
});

export const apiKeys = pgTable("api_keys", {
  id: uuid("id").primaryKey(),
  name: text("name").notNull(),
  /** The key's first characters, to tell keys apart in listings; never enough to use it. */
  prefix: text("prefix").notNull(),
  /** SHA-256 of the whole key: the key itself is never stored. */
  hash: text("hash").notNull().unique(),
  admin: boolean("admin").notNull(),
  /**
   * A small number of the key's own: its agents run as user id AGENT_BRIDGE_TENANT_UID_BASE + this
   * and group id AGENT_BRIDGE_TENANT_GID_BASE + this, which keeps one tenant's agent out of
   * another's HOME and processes (src/process/tenant-ids.ts).
   */
  tenantNumber: integer("tenant_number")
    .notNull()
    .generatedByDefaultAsIdentity({ startWith: 1 })
    .unique(),
  createdAt: ts("created_at").notNull(),
  lastUsedAt: ts("last_used_at"),
  revokedAt: ts("revoked_at"),
  // What the key's sessions and hooks may ask for (src/auth/policy.ts); null: the default.
  /** Permission modes allowed; null: all for an admin key, all but the bypass modes otherwise. */
  permissionModes: jsonb("permission_modes").$type<string[]>(),
  /** Real paths a work dir must lie in; null: the server's AGENT_BRIDGE_ALLOWED_ROOTS. */
  workRoots: jsonb("work_roots").$type<string[]>(),
  /** Spend allowed per calendar month (UTC); null: no cap. */
  maxBudgetUsd: doublePrecision("max_budget_usd"),
  /** Whether the key's sessions may run in a git worktree. */
  worktrees: boolean("worktrees").notNull().default(true),
  /** Where its sandboxed agents may connect, through the gateway's proxy (src/gateway/egress.ts). */
  egress: jsonb("egress").$type<string[]>().notNull().default([]),
  /** The models its runs may call through the model gateway; null: any. */
  models: jsonb("models").$type<string[]>(),
});

/**
 * What each key's runs cost per calendar month (UTC), added in the transaction that records a
 * run's end: the budget's ledger, which deleting a session (and its runs) leaves as it is.
 */
export const keySpend = pgTable(
  "key_spend",
  {
    keyId: uuid("key_id")
      .notNull()
      .references(() => apiKeys.id, { onDelete: "cascade" }),
    periodStart: ts("period_start").notNull(),
    costUsd: usd("cost_usd").notNull().default(0),
  },
  (t) => [primaryKey({ columns: [t.keyId, t.periodStart] })],
);

/**
 * Each key's request allowance (AGENT_BRIDGE_RATE_LIMIT_PER_MINUTE), a token bucket every instance
 * on the database draws from: `tokens` as of `updated_at`, in the database's time.
 */
export const rateBuckets = pgTable("rate_buckets", {
  /** The key's id, or "anonymous" without keys. */
  bucket: text("bucket").primaryKey(),
  tokens: doublePrecision("tokens").notNull(),
  updatedAt: ts("updated_at").notNull(),
});

/**
 * Secrets every instance on the database shares, made once by whichever needs one first: the key
 * that signs stream tokens, so that a token made by one instance is good at any other.
 */
export const serverSecrets = pgTable("server_secrets", {
  name: text("name").primaryKey(),
  secret: text("secret").notNull(),
  createdAt: ts("created_at").notNull(),
});

export const sessions = pgTable(
  "sessions",
  {
    // Also the CLI's session id (`--session-id`), which must be a UUID.
    id: uuid("id").primaryKey(),
    /** The key that created the session: its tenant. Null when auth is off. */
    ownerKeyId: uuid("owner_key_id").references(() => apiKeys.id),
    /** Real path the agent works in (inside an allowed root); null: the server's work dir. */
    workDir: text("work_dir"),
    title: text("title"),
    /** The back-end its runs use (src/agents/); fixed for the session's life. */
    agent: text("agent").notNull().default("claude"),
    /** The back-end's own session (thread) id, as its last run reported it; null before. */
    agentSessionId: text("agent_session_id"),
    permissionMode: text("permission_mode").notNull(),
    model: text("model"),
    effort: text("effort").notNull(),
    systemPrompt: text("system_prompt"),
    worktree: boolean("worktree").notNull(),
    /** Names of the admin's MCP servers (AGENT_BRIDGE_MCP_CONFIG) its runs get. */
    mcpServers: jsonb("mcp_servers").$type<string[]>().notNull().default([]),
    /** Caps of each run (a message may set its own); null: none. */
    maxTurns: integer("max_turns"),
    maxBudgetUsd: doublePrecision("max_budget_usd"),
    /** Who answers its runs' permission requests: `deny` (the bridge) or `api` (a client). */
    approvals: text("approvals").notNull().default("deny"),
    /** How long a request waits for an answer; null: the server's default. */
    approvalTimeoutSeconds: integer("approval_timeout_seconds"),
    /** Tool rules allowed for the rest of the session (answers with `scope: "session"`). */
    allowedTools: jsonb("allowed_tools").$type<string[]>().notNull().default([]),
    metadata: jsonb("metadata").$type<Record<string, string>>().notNull().default({}),
    createdAt: ts("created_at").notNull(),
    updatedAt: ts("updated_at").notNull(),
    lastActivityAt: ts("last_activity_at").notNull(),
    /** Set by the sweep once the session outlived its TTL; it then takes no more messages. */
    expiredAt: ts("expired_at"),
    ...usageColumns(),
    runs: integer("runs").notNull().default(0),
  },
  (t) => [
    index("sessions_created_at_id_idx").on(t.createdAt.desc(), t.id.desc()),
    index("sessions_owner_key_id_idx").on(t.ownerKeyId),
    // The sweep looks for live sessions idle for longer than the TTL.
    index("sessions_live_last_activity_idx")
      .on(t.lastActivityAt)
      .where(sql`${t.expiredAt} is null`),
  ],
);

// Every server process on the database: it renews its lease while it lives, and any instance
// that sees the lease expired closes the runs it owned (src/cluster/).
export const instances = pgTable("instances", {
  id: uuid("id").primaryKey(),
  host: text("host").notNull(),
  /** The kernel's boot id: a pid means the same process only within one boot. */
  bootId: text("boot_id"),
  pid: integer("pid").notNull(),
  version: text("version").notNull(),
  startedAt: ts("started_at").notNull(),
  /** Database time, as every lease comparison is: the instances' clocks may disagree. */
  heartbeatAt: timestamp("heartbeat_at", { withTimezone: true, mode: "date" }).notNull(),
  leaseExpiresAt: timestamp("lease_expires_at", { withTimezone: true, mode: "date" }).notNull(),
  /** Set once its runs are closed (by itself at a clean stop, or by whoever reaped it). */
  reapedAt: timestamp("reaped_at", { withTimezone: true, mode: "date" }),
});

export const runs = pgTable(
  "runs",
  {
    id: uuid("id").primaryKey(),
    sessionId: uuid("session_id")
      .notNull()
      .references(() => sessions.id, { onDelete: "cascade" }),
    status: text("status").notNull(),
    trigger: text("trigger").notNull(),
    prompt: text("prompt").notNull(),
    systemPrompt: text("system_prompt"),
    createdAt: ts("created_at").notNull(),
    startedAt: ts("started_at"),
    finishedAt: ts("finished_at"),
    exitCode: integer("exit_code"),
    ...usageColumns(),
    /** Null: the agent reported no cost and no price is configured for its model. */
    costUsd: usd("cost_usd").default(0),
    durationMs: integer("duration_ms"),
    durationApiMs: integer("duration_api_ms"),
    agent: text("agent").notNull().default("claude"),
    agentSessionId: text("agent_session_id"),
    lastMessageUuid: text("last_message_uuid"),
    /** Process group of the CLI while it runs, so a restart can kill what a crash left behind. */
    pgid: integer("pgid"),
    /** The boot the pgid belongs to: after a reboot the number may name someone else's group. */
    pgidBootId: text("pgid_boot_id"),
    /** The instance that executes the run; only it writes the run's events and completion. */
    instanceId: uuid("instance_id"),
    idempotencyKey: text("idempotency_key"),
    /** Hash of the request an idempotency key was first used with. */
    requestHash: text("request_hash"),
    /**
     * Set on a queued run left for any instance to claim (instance_id null): what its message set
     * for it alone (src/runs/handover.ts), which the claimer runs it with. Null on every other run.
     */
    handover: jsonb("handover"),
    /** Only an instance on this host may claim the run: its session's worktree is on its disk. */
    pinnedHost: text("pinned_host"),
    /**
     * The claim that last made an instance the owner of a run queued for any instance: an
     * instance that did not hear its claim's answer finds (and gives back) the run by it.
     */
    claimToken: uuid("claim_token"),
  },
  (t) => [
    index("runs_session_id_created_at_idx").on(t.sessionId, t.createdAt),
    // `GET /v1/runs`, newest first.
    index("runs_created_at_id_idx").on(t.createdAt.desc(), t.id.desc()),
    // At most one unfinished run per session, enforced by the database itself, so that two
    // messages racing for one session can never both start a CLI process.
    uniqueIndex("runs_one_active_per_session")
      .on(t.sessionId)
      .where(sql`${t.status} in ('queued', 'running')`),
    uniqueIndex("runs_session_idempotency_key")
      .on(t.sessionId, t.idempotencyKey)
      .where(sql`${t.idempotencyKey} is not null`),
    // Recovery looks for the runs a dead instance left unfinished.
    index("runs_unfinished_idx").on(t.status).where(sql`${t.status} in ('queued', 'running')`),
    index("runs_instance_unfinished_idx")
      .on(t.instanceId)
      .where(sql`${t.status} in ('queued', 'running', 'waiting')`),
    // Instances with a free slot claim from the unowned queued runs.
    index("runs_unowned_queued_idx")
      .on(t.createdAt, t.id)
      .where(sql`${t.status} = 'queued' and ${t.instanceId} is null`),
  ],
);

// Commands for a run's owner posted on another instance (cancel; later, answers to permission
// requests). The owner takes (deletes) them when its doorbell rings, or at its lease tick.
export const runCommands = pgTable(
  "run_commands",
  {
    id: uuid("id").primaryKey(),
    runId: uuid("run_id")
      .notNull()
      .references(() => runs.id, { onDelete: "cascade" }),
    kind: text("kind").notNull(),
    payload: jsonb("payload"),
    createdAt: ts("created_at").notNull(),
  },
  (t) => [index("run_commands_run_id_idx").on(t.runId)],
);

// The hottest table. A row is one batch of a run's events (whatever the run log gathered while
// its previous write was in flight), not one event: a row per event cost the database a tuple and
// an index entry each, which made the relay and the replay of a long run several times slower
// (`npm run bench`, README "Performance"). `events` holds one line per event, in the format of
// `src/store/events.ts`.
export const runEventBatches = pgTable(
  "run_event_batches",
  {
    runId: uuid("run_id")
      .notNull()
      .references(() => runs.id, { onDelete: "cascade" }),
    firstSeq: integer("first_seq").notNull(),
    // The key: a reader after position N wants the batches that end beyond it.
    lastSeq: integer("last_seq").notNull(),
    /** How many events of the default view the log holds up to this batch's end. */
    lastPublicSeq: integer("last_public_seq").notNull(),
    events: text("events").notNull(),
    createdAt: ts("created_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.runId, t.lastSeq] })],
);

export const worktrees = pgTable(
  "worktrees",
  {
    id: uuid("id").primaryKey(),
    sessionId: uuid("session_id")
      .notNull()
      .references(() => sessions.id, { onDelete: "cascade" }),
    path: text("path").notNull(),
    branch: text("branch").notNull(),
    baseRef: text("base_ref"),
    state: text("state").notNull(),
    /** The host whose disk holds the worktree (null: recorded before hosts were): its runs run there. */
    host: text("host"),
    createdAt: ts("created_at").notNull(),
    removedAt: ts("removed_at"),
  },
  (t) => [index("worktrees_session_id_idx").on(t.sessionId)],
);

/**
 * Each session's CLI transcript (the file its next run resumes from), as of its latest run, so
 * that the session can go on at any instance: gzipped, with the path it has under the CLI's
 * state dir and the SHA-256 of its uncompressed bytes, to tell whether a copy on disk is current.
 */
export const agentTranscripts = pgTable("agent_transcripts", {
  sessionId: uuid("session_id")
    .primaryKey()
    .references(() => sessions.id, { onDelete: "cascade" }),
  path: text("path").notNull(),
  sha256: text("sha256").notNull(),
  gzipped: bytea("gzipped").notNull(),
  updatedAt: ts("updated_at").notNull(),
});

/** Incoming webhooks and schedules: each delivery (or tick) starts one run of the agent. */
export const hooks = pgTable("hooks", {
  id: uuid("id").primaryKey(),
  name: text("name").notNull().unique(),
  /** The key that made the hook: the sessions its deliveries start belong to it. */
  ownerKeyId: uuid("owner_key_id").references(() => apiKeys.id),
  /** `github`, `standard` (Standard Webhooks) or `bearer`. */
  verification: text("verification").notNull(),
  /** Kept as given, since an HMAC needs it; never returned by the API and never logged. */
  secret: text("secret").notNull(),
  promptTemplate: text("prompt_template").notNull(),
  systemPromptTemplate: text("system_prompt_template"),
  sessionKeyTemplate: text("session_key_template"),
  /** Session options; null takes the server's default when a session is made. */
  agent: text("agent"),
  workDir: text("work_dir"),
  worktree: boolean("worktree"),
  permissionMode: text("permission_mode"),
  model: text("model"),
  effort: text("effort"),
  /** The MCP servers its sessions get, by name. */
  mcpServers: jsonb("mcp_servers").$type<string[]>().notNull().default([]),
  /** Who answers its sessions' permission requests (`deny`: nobody is there to). */
  approvals: text("approvals").notNull().default("deny"),
  /** Events (or `event.action`) a delivery must match; empty accepts all. */
  events: jsonb("events").$type<string[]>().notNull().default([]),
  callbackUrl: text("callback_url"),
  callbackSecret: text("callback_secret"),
  /** A cron pattern and its time zone: the hook also fires by itself. */
  schedule: text("schedule"),
  timezone: text("timezone"),
  createdAt: ts("created_at").notNull(),
  updatedAt: ts("updated_at").notNull(),
});

export const hookDeliveries = pgTable(
  "hook_deliveries",
  {
    id: uuid("id").primaryKey(),
    hookId: uuid("hook_id")
      .notNull()
      .references(() => hooks.id, { onDelete: "cascade" }),
    /** The sender's delivery id, or `schedule:<fire time>` for a tick. */
    deliveryId: text("delivery_id").notNull(),
    /** `webhook` or `schedule`. */
    source: text("source").notNull(),
    event: text("event").notNull(),
    receivedAt: ts("received_at").notNull(),
    /** `received` (being started), `accepted`, `ignored` (filtered), `skipped` (busy), `failed`. */
    outcome: text("outcome").notNull(),
    detail: text("detail"),
    runId: uuid("run_id").references(() => runs.id, { onDelete: "set null" }),
    sessionId: uuid("session_id").references(() => sessions.id, { onDelete: "set null" }),
  },
  (t) => [
    // A sender's retry of a delivery, and a tick claimed by two processes, land here once.
    uniqueIndex("hook_deliveries_hook_delivery_id").on(t.hookId, t.deliveryId),
    index("hook_deliveries_hook_received_idx").on(t.hookId, t.receivedAt.desc(), t.id.desc()),
  ],
);

/** Which session a rendered session key continues. */
export const hookSessions = pgTable(
  "hook_sessions",
  {
    hookId: uuid("hook_id")
      .notNull()
      .references(() => hooks.id, { onDelete: "cascade" }),
    key: text("key").notNull(),
    sessionId: uuid("session_id")
      .notNull()
      .references(() => sessions.id, { onDelete: "cascade" }),
    createdAt: ts("created_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.hookId, t.key] })],
);

/**
 * The outbox of completion callbacks: written with the run, made due in the transaction that
 * records its completion, then sent (and retried) by the outbox worker until a 2xx.
 */
export const callbacks = pgTable(
  "callbacks",
  {
    runId: uuid("run_id")
      .primaryKey()
      .references(() => runs.id, { onDelete: "cascade" }),
    url: text("url").notNull(),
    /** A copy of the hook's callback secret, so that a callback outlives a change of its hook. */
    secret: text("secret").notNull(),
    /** `pending`, `delivered` or `failed` (attempts used up). */
    state: text("state").notNull(),
    attempts: integer("attempts").notNull().default(0),
    /** Null until the run completes. */
    nextAttemptAt: ts("next_attempt_at"),
    /** A worker holds the row until then while it sends; a crashed worker's hold runs out. */
    lockedUntil: ts("locked_until"),
    /** The signed body, fixed at the first attempt so that every retry sends the same bytes. */
    body: text("body"),
    lastError: text("last_error"),
    lastStatus: integer("last_status"),
    createdAt: ts("created_at").notNull(),
    deliveredAt: ts("delivered_at"),
  },
  (t) => [index("callbacks_due_idx").on(t.nextAttemptAt).where(sql`${t.state} = 'pending'`)],
);

// A run's permission requests (`approvals: "api"`), recorded before their event goes out so that
// a reconnecting client, GET …/permissions and another instance all see them; an answer is
// recorded here first, whichever instance it reaches.
export const permissionRequests = pgTable(
  "permission_requests",
  {
    runId: uuid("run_id")
      .notNull()
      .references(() => runs.id, { onDelete: "cascade" }),
    /** The CLI's id of the request, unique within its run. */
    requestId: text("request_id").notNull(),
    toolName: text("tool_name").notNull(),
    toolUseId: text("tool_use_id"),
    input: jsonb("input").$type<Record<string, unknown>>().notNull(),
    suggestions: jsonb("suggestions").$type<unknown[]>().notNull(),
    /** `pending`, then `allowed`, `denied`, `expired` or `cancelled`. */
    state: text("state").notNull(),
    /** Who resolved it: client, timeout, cancel. */
    by: text("by"),
    /** The API key whose answer it was (`by: client`); null without keys. */
    answeredByKeyId: uuid("answered_by_key_id").references(() => apiKeys.id),
    /** The answer as the CLI gets it (PermissionAnswer), once given. */
    answer: jsonb("answer").$type<Record<string, unknown>>(),
    scope: text("scope"),
    createdAt: ts("created_at").notNull(),
    expiresAt: ts("expires_at").notNull(),
    answeredAt: ts("answered_at"),
  },
  (t) => [primaryKey({ columns: [t.runId, t.requestId] })],
);

// Each call a run's CLI made to a model API through the gateway (src/gateway/), with the usage
// the API reported in it, written as the call ends: what a run spent by the API's own account,
// whatever its CLI says at its end.
export const modelCalls = pgTable(
  "model_calls",
  {
    id: uuid("id").primaryKey(),
    runId: uuid("run_id")
      .notNull()
      .references(() => runs.id, { onDelete: "cascade" }),
    /** The API's path that was called (`/v1/messages`). */
    endpoint: text("endpoint").notNull(),
    /** The model that answered, else the one asked for; null when neither could be read. */
    model: text("model"),
    inputTokens: tokens("input_tokens"),
    outputTokens: tokens("output_tokens"),
    cacheReadTokens: tokens("cache_read_tokens"),
    cacheCreationTokens: tokens("cache_creation_tokens"),
    /** What its tokens cost at its model's price (src/prices.ts); null: the model has none. */
    costUsd: usd("cost_usd"),
    /**
     * The HTTP status the caller got: the upstream's, or the gateway's 502 when the upstream could
     * not be reached; 499 when the caller went away before the answer began.
     */
    status: integer("status").notNull(),
    /** Null: answered in full. Else why not: the API's error type, or how the call broke off. */
    error: text("error"),
    /** The upstream's `request-id`, to quote to its support. */
    requestId: text("request_id"),
    startedAt: ts("started_at").notNull(),
    durationMs: integer("duration_ms").notNull(),
  },
  (t) => [index("model_calls_run_id_idx").on(t.runId)],
);

export type ApiKeyRow = typeof apiKeys.$inferSelect;
export type SessionRow = typeof sessions.$inferSelect;
export type RunRow = typeof runs.$inferSelect;
export type WorktreeRow = typeof worktrees.$inferSelect;
export type HookRow = typeof hooks.$inferSelect;
export type HookDeliveryRow = typeof hookDeliveries.$inferSelect;
export type CallbackRow = typeof callbacks.$inferSelect;
export type PermissionRequestRow = typeof permissionRequests.$inferSelect;
export type ModelCallRow = typeof modelCalls.$inferSelect;
