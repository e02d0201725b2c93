import { sql } from "drizzle-orm";
import {
  bigint,
  boolean,
  doublePrecision,
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

// Timestamps are written from JS (millisecond precision) rather than defaultNow(), so that a
// value read back compares equal to the one used in a paging cursor.
const ts = (name: string) => timestamp(name, { withTimezone: true, mode: "date" });
const tokens = (name: string) => bigint(name, { mode: "number" }).notNull().default(0);

/** Token and cost totals; a session adds up its runs' usage here. */
const usageColumns = () => ({
  inputTokens: tokens("input_tokens"),
  outputTokens: tokens("output_tokens"),
  cacheReadTokens: tokens("cache_read_tokens"),
  cacheCreationTokens: tokens("cache_creation_tokens"),
  costUsd: doublePrecision("cost_usd").notNull().default(0),
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
  createdAt: ts("created_at").notNull(),
  lastUsedAt: ts("last_used_at"),
  revokedAt: ts("revoked_at"),
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
    permissionMode: text("permission_mode").notNull(),
    model: text("model"),
    effort: text("effort").notNull(),
    systemPrompt: text("system_prompt"),
    worktree: boolean("worktree").notNull(),
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
    error: text("error"),
    result: text("result"),
    ...usageColumns(),
    durationMs: integer("duration_ms"),
    durationApiMs: integer("duration_api_ms"),
    claudeSessionId: text("claude_session_id"),
    lastMessageUuid: text("last_message_uuid"),
    /** Process group of the CLI while it runs, so a restart can kill what a crash left behind. */
    pgid: integer("pgid"),
    idempotencyKey: text("idempotency_key"),
    /** Hash of the request an idempotency key was first used with. */
    requestHash: text("request_hash"),
  },
  (t) => [
    index("runs_session_id_created_at_idx").on(t.sessionId, t.createdAt),
    // At most one unfinished run per session, enforced by the database itself, so that two
    // messages racing for one session can never both start a CLI process.
    uniqueIndex("runs_one_active_per_session")
      .on(t.sessionId)
      .where(sql`${t.status} in ('queued', 'running')`),
    uniqueIndex("runs_session_idempotency_key")
      .on(t.sessionId, t.idempotencyKey)
      .where(sql`${t.idempotencyKey} is not null`),
    // Start-up recovery looks for runs a previous process left unfinished.
    index("runs_unfinished_idx").on(t.status).where(sql`${t.status} in ('queued', 'running')`),
  ],
);

export const runEvents = pgTable(
  "run_events",
  {
    runId: uuid("run_id")
      .notNull()
      .references(() => runs.id, { onDelete: "cascade" }),
    seq: integer("seq").notNull(),
    /**
     * Position among the events a client sees by default (internal ones such as `reasoning` have
     * none), so that the default stream's ids have no gaps either.
     */
    publicSeq: integer("public_seq"),
    type: text("type").notNull(),
    // json, not jsonb: a replay must send the very bytes the live stream sent, key order included.
    data: json("data").$type<Record<string, unknown>>().notNull(),
    createdAt: ts("created_at").notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.runId, t.seq] }),
    uniqueIndex("run_events_run_id_public_seq").on(t.runId, t.publicSeq),
  ],
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
    createdAt: ts("created_at").notNull(),
    removedAt: ts("removed_at"),
  },
  (t) => [index("worktrees_session_id_idx").on(t.sessionId)],
);

export type ApiKeyRow = typeof apiKeys.$inferSelect;
export type SessionRow = typeof sessions.$inferSelect;
export type RunRow = typeof runs.$inferSelect;
export type RunEventRow = typeof runEvents.$inferSelect;
export type WorktreeRow = typeof worktrees.$inferSelect;
