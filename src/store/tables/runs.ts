import { sql } from "drizzle-orm";
import {
  bigint,
  index,
  integer,
  json,
  jsonb,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from "drizzle-orm/pg-core";
import { tokens, ts, usageColumns, usd } from "./columns.js";
import { apiKeys } from "./keys.js";
import { sessions } from "./sessions.js";

/** An image a run's message carried, as the run keeps it: no bytes. */
export interface StoredImage {
  /** `image-<n>.<ext>`, n from 1 in the message's order (as codex gets them as files). */
  name: string;
  media_type: string;
  size_bytes: number;
}

// Instances, runs, commands to a run's owner, the event log, permission requests and metered
// model calls.

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
    /**
     * The JSON Schema its agent's answer must match (src/output-schema.ts); null: free text.
     * `json`, not `jsonb`, which reorders keys: the order of `properties` is the order in which the
     * model is asked to answer.
     */
    outputSchema: json("output_schema").$type<Record<string, unknown>>(),
    /**
     * The images its message carried, named and measured, never their bytes (src/agents/images.ts):
     * what the conversation (`GET /v1/sessions/{id}/messages`) shows of them. Null: none.
     */
    images: jsonb("images").$type<StoredImage[]>(),
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
    /**
     * The pull (merge) request whose head the run checks out first (src/worktrees/change.ts):
     * `{forge, number}`; null for every other run.
     */
    checkout: jsonb("checkout"),
    /**
     * Where the run's sandbox may connect besides what its key's egress list allows: both must
     * allow a host (a fork's pull request: src/forges/fork.ts). Null: the key's list alone.
     */
    egress: jsonb("egress").$type<string[]>(),
    /** Only an instance on this host may claim the run: its session's worktree is on its disk. */
    pinnedHost: text("pinned_host"),
    /**
     * The claim that last made an instance the owner of a run queued for any instance: an
     * instance that did not hear its claim's answer finds (and gives back) the run by it.
     */
    claimToken: uuid("claim_token"),
    /**
     * The order in which runs were written, from one database sequence: a session's waiting runs
     * take their turns in it, whichever instance wrote each (the instances' clocks may disagree).
     */
    admissionSeq: bigint("admission_seq", { mode: "number" })
      .notNull()
      .generatedByDefaultAsIdentity({ startWith: 1 }),
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
    // A session's line: its waiting runs, oldest first.
    index("runs_waiting_line_idx")
      .on(t.sessionId, t.admissionSeq)
      .where(sql`${t.status} = 'waiting'`),
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

// What a run's owner answered to a command that asks for an answer (a client's input, a switch of
// model or mode, posted on another instance): the poster takes (deletes) it.
export const runCommandReplies = pgTable("run_command_replies", {
  commandId: uuid("command_id").primaryKey(),
  runId: uuid("run_id")
    .notNull()
    .references(() => runs.id, { onDelete: "cascade" }),
  reply: jsonb("reply").notNull(),
  createdAt: ts("created_at").notNull(),
});

// The hottest table. A row is one batch of a run's events (whatever the run log gathered while
// its previous write was in flight), not one event: a row per event cost the database a tuple and
// an index entry each, which made the relay and the replay of a long run several times slower
// (`npm run bench`, docs/performance.md). `events` holds one line per event, in the format of
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
