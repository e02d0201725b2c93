import { sql } from "drizzle-orm";
import { index, integer, jsonb, pgTable, text, uniqueIndex, uuid } from "drizzle-orm/pg-core";
import { ts } from "./columns.js";
import { hooks } from "./hooks.js";
import { runs } from "./runs.js";

// The outbox of replies on a forge: what a hook's run posts where its delivery came from.

/** Where on the forge a reply goes, read from the delivery (src/forges/delivery.ts). */
export interface ReplyTarget {
  forge: "github" | "gitlab";
  /** `owner/name` (GitHub) or the project's path (GitLab). */
  repository: string | null;
  /** GitLab's project id. */
  projectId: number | null;
  subject: { kind: "pull_request" | "issue"; number: number };
  /** The change's head commit; null until looked up when the payload did not carry it. */
  sha: string | null;
  /** The check's or commit status's name (`agent-bridge/<hook>`). */
  name: string;
}

/**
 * One reply of a run: its comment (or note), its check run or commit status, its review. Written
 * with the run; due at the run's start, on its progress (throttled) and at its completion; sent
 * (and retried) by the reply outbox with the hook's token, read when it sends.
 */
export const replies = pgTable(
  "replies",
  {
    id: uuid("id").primaryKey(),
    runId: uuid("run_id")
      .notNull()
      .references(() => runs.id, { onDelete: "cascade" }),
    /** Whose token it is sent with; null once the hook is deleted (then it fails). */
    hookId: uuid("hook_id").references(() => hooks.id, { onDelete: "set null" }),
    /** `comment`, `check`, `status` or `review`. */
    kind: text("kind").notNull(),
    target: jsonb("target").$type<ReplyTarget>().notNull(),
    /** `progress` while the run goes; `final` once it has ended (what to send is its result). */
    phase: text("phase").notNull(),
    /** `pending` (to send), `posted` (what there is has been sent), `failed`, `skipped`. */
    state: text("state").notNull(),
    /** The forge's id of what was created (a comment, a check run), to update it. */
    objectId: text("object_id"),
    /** Where people see it (`html_url`, `web_url`). */
    url: text("url"),
    /** The tools the run has used so far, in order (bounded): the progress the comment shows. */
    tools: jsonb("tools").$type<string[]>().notNull().default([]),
    /** Bumped by each change to send; a send that saw an older one leaves the reply due. */
    revision: integer("revision").notNull().default(0),
    attempts: integer("attempts").notNull().default(0),
    /** Failed attempts since the last success: bounded by the callback attempts setting. */
    failures: integer("failures").notNull().default(0),
    /** Null: nothing to send now. */
    nextAttemptAt: ts("next_attempt_at"),
    /** A worker holds the row until then while it sends; a crashed worker's hold runs out. */
    lockedUntil: ts("locked_until"),
    /** The body last sent. */
    body: text("body"),
    lastStatus: integer("last_status"),
    lastError: text("last_error"),
    sentAt: ts("sent_at"),
    createdAt: ts("created_at").notNull(),
    updatedAt: ts("updated_at").notNull(),
  },
  (t) => [
    uniqueIndex("replies_run_kind").on(t.runId, t.kind),
    index("replies_due_idx").on(t.nextAttemptAt).where(sql`${t.state} = 'pending'`),
  ],
);
