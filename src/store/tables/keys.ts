import {
  boolean,
  doublePrecision,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  text,
  uuid,
} from "drizzle-orm/pg-core";
import type { ToolRuleEntry } from "../../tool-rules.js";
import { ts, usd } from "./columns.js";

// API keys, their spend per month, rate-limit buckets and the server's own secrets.

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
  /** Rules of its agents' tool uses, checked before a session's (src/tool-rules.ts). */
  toolRules: jsonb("tool_rules").$type<ToolRuleEntry[]>().notNull().default([]),
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
