import { sql } from "drizzle-orm";
import {
  boolean,
  doublePrecision,
  index,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  text,
  uuid,
} from "drizzle-orm/pg-core";
import type { ToolRuleEntry } from "../../tool-rules.js";
import { bytea, ts, usageColumns } from "./columns.js";
import { apiKeys } from "./keys.js";

// Sessions, their git worktrees and their agents' saved transcripts.

/** Where a forked session came from. */
export interface ForkOrigin {
  sessionId: string;
  runId: string;
  /** The agent's own session the fork's conversation is copied from (Claude Code: `--resume`). */
  agentSessionId: string;
  /** The message of that conversation the fork goes on after (`--resume-session-at`). */
  resumeAt: string;
  /**
   * The API time the copied conversation had taken when the fork was made (its session's runs',
   * and that session's own origin's): the CLI goes on from it in the fork (claude/fork.ts).
   * Absent on forks made before it was kept.
   */
  apiMsBefore?: number;
}

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
    /** Tool rules its runs may never use (`--disallowedTools`). */
    disallowedTools: jsonb("disallowed_tools").$type<string[]>().notNull().default([]),
    /** Rules of its runs' tool uses, after its key's (src/tool-rules.ts). */
    toolRules: jsonb("tool_rules").$type<ToolRuleEntry[]>().notNull().default([]),
    /** Real paths of more directories its runs may use and write (`--add-dir`). */
    addDirs: jsonb("add_dirs").$type<string[]>().notNull().default([]),
    /** Its runs' agent may not end with uncommitted changes unsaid (src/agents/claude/stop-check.ts). */
    requireCleanWorkDir: boolean("require_clean_work_dir").notNull().default(false),
    metadata: jsonb("metadata").$type<Record<string, string>>().notNull().default({}),
    createdAt: ts("created_at").notNull(),
    updatedAt: ts("updated_at").notNull(),
    lastActivityAt: ts("last_activity_at").notNull(),
    /**
     * Set on a fork (POST /v1/sessions/{id}/fork): the session and run it branched after, and the
     * agent's conversation and message its first run continues from (http/routes/sessions/fork.handlers.ts).
     */
    forkedFrom: jsonb("forked_from").$type<ForkOrigin>(),
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
 * that the session can go on at any instance: where it is under the CLI's state dir, its length
 * and the digest of its last bytes (the seam a file on disk must hold to continue it, checked
 * without reading the file whole), its bytes in agentTranscriptPieces.
 */
export const agentTranscripts = pgTable("agent_transcripts", {
  sessionId: uuid("session_id")
    .primaryKey()
    .references(() => sessions.id, { onDelete: "cascade" }),
  path: text("path").notNull(),
  /** Its bytes, all pieces together. */
  length: integer("length").notNull(),
  /**
   * The SHA-256 of its last bytes (src/runs/transcripts.ts); null for a copy stored whole before
   * pieces were, which is read to find it.
   */
  seam: text("seam"),
  updatedAt: ts("updated_at").notNull(),
});

/**
 * A stored transcript's bytes, in pieces, each gzipped on its own: the whole copy of a run, then
 * what each later run appended. In `seq` order the gzip members make one gzip stream of it.
 */
export const agentTranscriptPieces = pgTable(
  "agent_transcript_pieces",
  {
    sessionId: uuid("session_id")
      .notNull()
      .references(() => agentTranscripts.sessionId, { onDelete: "cascade" }),
    seq: integer("seq").notNull(),
    gzipped: bytea("gzipped").notNull(),
  },
  (t) => [primaryKey({ columns: [t.sessionId, t.seq] })],
);
