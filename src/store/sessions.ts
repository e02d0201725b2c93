import { randomUUID } from "node:crypto";
import { and, eq, type Placeholder, type SQL, sql } from "drizzle-orm";
import type { UsageBefore } from "../events.js";
import type { Principal } from "../principal.js";
import { SessionSettings } from "../session-settings.js";
import type { ToolRuleEntry } from "../tool-rules.js";
import type { Database } from "./db.js";
import { appendFeed, sessionCreated } from "./feed.js";
import { newestFirst, olderThan, type PageKey } from "./paging.js";
import { preparedFor } from "./prepared.js";
import { runs, type SessionRow, sessions } from "./schema.js";

export interface NewSession {
  ownerKeyId: string | null;
  workDir: string | null;
  title: string | null;
  agent: string;
  permissionMode: string;
  model: string | null;
  effort: string;
  systemPrompt: string | null;
  worktree: boolean;
  /** Absent: none, no cap. */
  mcpServers?: string[];
  maxTurns?: number | null;
  maxBudgetUsd?: number | null;
  /** Absent: `deny`, and the server's approval timeout. */
  approvals?: string;
  approvalTimeoutSeconds?: number | null;
  /** Absent: none. */
  disallowedTools?: string[];
  toolRules?: ToolRuleEntry[];
  addDirs?: string[];
  requireCleanWorkDir?: boolean;
  metadata: Record<string, string>;
}

export async function createSession(db: Database, input: NewSession): Promise<SessionRow> {
  const now = new Date();
  return db.transaction(async (tx) => {
    const [row] = await tx
      .insert(sessions)
      .values({ id: randomUUID(), ...input, createdAt: now, updatedAt: now, lastActivityAt: now })
      .returning();
    if (!row) throw new Error("insert into sessions returned no row");
    await appendFeed(tx, [sessionCreated(row)]);
    return row;
  });
}

/** The settings the session's runs get (a message may set its own caps). */
export function sessionSettings(row: SessionRow): SessionSettings {
  return SessionSettings.parse({
    permissionMode: row.permissionMode,
    effort: row.effort,
    model: row.model,
    systemPrompt: row.systemPrompt,
    worktree: row.worktree,
    mcpServers: row.mcpServers,
    maxTurns: row.maxTurns,
    maxBudgetUsd: row.maxBudgetUsd,
    approvals: row.approvals,
    disallowedTools: row.disallowedTools,
    toolRules: row.toolRules,
    addDirs: row.addDirs,
    requireCleanWorkDir: row.requireCleanWorkDir,
  });
}

/** What a patch of a session may change (`PATCH /v1/sessions/{id}`); absent: left as it is. */
export type SessionChanges = Partial<
  Pick<
    SessionRow,
    | "title"
    | "metadata"
    | "permissionMode"
    | "model"
    | "effort"
    | "systemPrompt"
    | "mcpServers"
    | "maxTurns"
    | "maxBudgetUsd"
    | "approvals"
    | "approvalTimeoutSeconds"
    | "allowedTools"
    | "disallowedTools"
    | "toolRules"
    | "addDirs"
    | "requireCleanWorkDir"
  >
>;

/**
 * Changes the session's settings in one statement (only the columns given, so that two patches of
 * different fields at once both hold) and moves `updated_at`; undefined when it is gone.
 */
export async function updateSession(
  db: Database,
  id: string,
  changes: SessionChanges,
): Promise<SessionRow | undefined> {
  const [row] = await db
    .update(sessions)
    .set({ ...changes, updatedAt: new Date() })
    .where(eq(sessions.id, id))
    .returning();
  return row;
}

/** Sessions the caller may see: an admin sees all, any other key only the sessions it created. */
export function visibleTo(principal: Principal): SQL | undefined {
  return principal.admin ? undefined : eq(sessions.ownerKeyId, principal.keyId ?? "");
}

/** Whether the caller may see a session read without asking that: as visibleTo says. */
export function isVisibleTo(principal: Principal, session: SessionRow): boolean {
  return principal.admin || session.ownerKeyId === (principal.keyId ?? "");
}

const sessionById = preparedFor((db) =>
  db
    .select()
    .from(sessions)
    .where(eq(sessions.id, sql.placeholder("id")))
    .prepare("session_by_id"),
);
const ownSessionById = preparedFor((db) =>
  db
    .select()
    .from(sessions)
    .where(
      and(
        eq(sessions.id, sql.placeholder("id")),
        eq(sessions.ownerKeyId, sql.placeholder("owner")),
      ),
    )
    .prepare("own_session_by_id"),
);

/** The session, when it exists and the caller may see it (else undefined: a 404 either way). */
export async function getSession(
  db: Database,
  id: string,
  principal: Principal,
): Promise<SessionRow | undefined> {
  // As visibleTo says.
  const [row] = principal.admin
    ? await sessionById(db).execute({ id })
    : await ownSessionById(db).execute({ id, owner: principal.keyId ?? "" });
  return row;
}

/** Newest first (see paging.ts). */
export async function listSessions(
  db: Database,
  principal: Principal,
  page: { limit: number; after?: PageKey },
): Promise<SessionRow[]> {
  return db
    .select()
    .from(sessions)
    .where(and(visibleTo(principal), olderThan(sessions.createdAt, sessions.id, page.after)))
    .orderBy(...newestFirst(sessions.createdAt, sessions.id))
    .limit(page.limit);
}

/** Deletes the session with its runs, their events and its worktree records; false when there was none. */
export async function deleteSession(db: Database, id: string): Promise<boolean> {
  return db.transaction(async (tx) => {
    const [deleted] = await tx
      .delete(sessions)
      .where(eq(sessions.id, id))
      .returning({ id: sessions.id, ownerKeyId: sessions.ownerKeyId });
    if (!deleted) return false;
    await appendFeed(tx, [
      { type: "session_deleted", sessionId: id, ownerKeyId: deleted.ownerKeyId, data: {} },
    ]);
    return true;
  });
}

/** A session's usage totals as the API shows them (SessionUsage), for a select or a returning. */
export const sessionUsageColumns = {
  input_tokens: sessions.inputTokens,
  output_tokens: sessions.outputTokens,
  cache_read_tokens: sessions.cacheReadTokens,
  cache_creation_tokens: sessions.cacheCreationTokens,
  cost_usd: sessions.costUsd,
  num_turns: sessions.numTurns,
  runs: sessions.runs,
};

/**
 * The API time the session's conversation has taken, as its agent counts it: its runs', and for a
 * fork what the conversation it was copied from had taken then (the CLI goes on from that total).
 */
export const conversationApiMs = (id: string | Placeholder) =>
  sql`(select coalesce(sum(${runs.durationApiMs}), 0) from ${runs} where ${runs.sessionId} = ${id}) + coalesce((${sessions.forkedFrom} ->> 'apiMsBefore')::bigint, 0)`.mapWith(
    Number,
  );

const totalsOf = preparedFor((db) => {
  const id = sql.placeholder("id");
  return db
    .select({ ...sessionUsageColumns, duration_api_ms: conversationApiMs(id) })
    .from(sessions)
    .where(eq(sessions.id, id))
    .prepare("session_totals");
});

/** The session's usage so far, with its conversation's API time; undefined when it is gone. */
export async function sessionTotals(db: Database, id: string): Promise<UsageBefore | undefined> {
  const [row] = await totalsOf(db).execute({ id });
  return row;
}
