import { sql } from "drizzle-orm";
import {
  bigint,
  boolean,
  doublePrecision,
  index,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  text,
  timestamp,
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

export const sessions = pgTable(
  "sessions",
  {
    // Also the CLI's session id (`--session-id`), which must be a UUID.
    id: uuid("id").primaryKey(),
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
    ...usageColumns(),
    runs: integer("runs").notNull().default(0),
  },
  (t) => [index("sessions_created_at_id_idx").on(t.createdAt.desc(), t.id.desc())],
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
  },
  (t) => [
    index("runs_session_id_created_at_idx").on(t.sessionId, t.createdAt),
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
    type: text("type").notNull(),
    data: jsonb("data").$type<Record<string, unknown>>().notNull(),
    createdAt: ts("created_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.runId, t.seq] })],
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

export type SessionRow = typeof sessions.$inferSelect;
export type RunRow = typeof runs.$inferSelect;
export type RunEventRow = typeof runEvents.$inferSelect;
export type WorktreeRow = typeof worktrees.$inferSelect;
