import { sql } from "drizzle-orm";
import {
  boolean,
  index,
  integer,
  json,
  jsonb,
  pgTable,
  primaryKey,
  text,
  uniqueIndex,
  uuid,
} from "drizzle-orm/pg-core";
import type { ForkPolicy, Triggers, Trusted } from "../../hook-triggers.js";
import { ts } from "./columns.js";
import { apiKeys } from "./keys.js";
import { runs } from "./runs.js";
import { sessions } from "./sessions.js";

// Webhooks and schedules, their deliveries, the sessions their keys continue, and callbacks.

/** A hook's `reply`: what its runs post where their delivery came from. */
export interface ReplySettings {
  comment: boolean;
  status: "check" | "status" | "none";
  reviewComments: boolean;
}

/** Incoming webhooks and schedules: each delivery (or tick) starts one run of the agent. */
export const hooks = pgTable("hooks", {
  id: uuid("id").primaryKey(),
  name: text("name").notNull().unique(),
  /** The key that made the hook: the sessions its deliveries start belong to it. */
  ownerKeyId: uuid("owner_key_id").references(() => apiKeys.id),
  /** `github`, `gitlab`, `standard` (Standard Webhooks) or `bearer`. */
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
  /** `pull_request`: a delivery's run works in a worktree of its pull (merge) request's head. */
  checkout: text("checkout"),
  /**
   * Where a checkout's fetch takes heads from (an https:// URL, or a local path the operator
   * allows): pinned by the admin, never read from a tenant's repository at fetch time.
   */
  checkoutOrigin: text("checkout_origin"),
  /** Events (or `event.action`) a delivery must match; empty accepts all. */
  events: jsonb("events").$type<string[]>().notNull().default([]),
  /** The output schema each delivery's run carries (src/output-schema.ts), as runs keep it. */
  outputSchema: json("output_schema").$type<Record<string, unknown>>(),
  callbackUrl: text("callback_url"),
  callbackSecret: text("callback_secret"),
  /** `github` or `gitlab`: whose deliveries these are and whose API it calls; null: neither. */
  forge: text("forge"),
  /** The forge's REST API (null: github.com's or gitlab.com's). */
  forgeApiUrl: text("forge_api_url"),
  /** The token for that API, kept like the secret: never returned, never in an agent's reach. */
  forgeToken: text("forge_token"),
  /** Null: every delivery its `events` let through runs; else only one matching a trigger. */
  triggers: jsonb("triggers").$type<Triggers>(),
  /** Who may trigger it by what they wrote or did; null: the defaults (src/forges/trust.ts). */
  trusted: jsonb("trusted").$type<Trusted>(),
  /** What a run for a fork's pull request gets; null: the defaults (src/forges/fork.ts). */
  fork: jsonb("fork").$type<ForkPolicy>(),
  /** What its runs post back on the forge (`reply` in the API); null: nothing. */
  reply: jsonb("reply").$type<ReplySettings>(),
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
