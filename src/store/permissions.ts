import { isDeepStrictEqual } from "node:util";
import { and, asc, eq, inArray, sql } from "drizzle-orm";
import type { Database } from "./db.js";
import { appendFeed, permissionResolved } from "./feed.js";
import { type PermissionRequestRow, permissionRequests, sessions } from "./schema.js";

// A run's permission requests (`approvals: "api"`) and their answers. Every change of state is
// conditional on `pending`, so an answer, the timeout and the run's end cannot all resolve one.

export const PERMISSION_STATES = ["pending", "allowed", "denied", "expired", "cancelled"] as const;
export type PermissionState = (typeof PERMISSION_STATES)[number];

export type NewPermissionRequest = Omit<
  PermissionRequestRow,
  "state" | "by" | "answeredByKeyId" | "answer" | "scope" | "answeredAt"
>;

export async function insertPermissionRequest(
  db: Database,
  input: NewPermissionRequest,
): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.insert(permissionRequests).values({ ...input, state: "pending" });
    await appendFeed(tx, [
      {
        type: "permission_requested",
        runId: input.runId,
        data: {
          request_id: input.requestId,
          tool_name: input.toolName,
          expires_at: input.expiresAt.toISOString(),
        },
      },
    ]);
  });
}

export async function getPermissionRequest(
  db: Database,
  runId: string,
  requestId: string,
): Promise<PermissionRequestRow | undefined> {
  const [row] = await db
    .select()
    .from(permissionRequests)
    .where(and(eq(permissionRequests.runId, runId), eq(permissionRequests.requestId, requestId)));
  return row;
}

export function listPermissionRequests(
  db: Database,
  runId: string,
): Promise<PermissionRequestRow[]> {
  return db
    .select()
    .from(permissionRequests)
    .where(eq(permissionRequests.runId, runId))
    .orderBy(asc(permissionRequests.createdAt), asc(permissionRequests.requestId));
}

/** Which of the runs have a request waiting for an answer. */
export async function runsWithPendingRequests(
  db: Database,
  runIds: string[],
): Promise<Set<string>> {
  if (runIds.length === 0) return new Set();
  const rows = await db
    .selectDistinct({ runId: permissionRequests.runId })
    .from(permissionRequests)
    .where(and(inArray(permissionRequests.runId, runIds), eq(permissionRequests.state, "pending")));
  return new Set(rows.map((row) => row.runId));
}

/** Resolves a pending request; the row as resolved, or undefined when it was no longer pending. */
export async function resolvePermissionRequest(
  db: Database,
  runId: string,
  requestId: string,
  resolution: {
    state: Exclude<PermissionState, "pending">;
    by: string;
    /** The API key that answered (`by: client`), when the server has keys. */
    answeredByKeyId?: string | null;
    answer?: Record<string, unknown>;
    scope?: string;
  },
): Promise<PermissionRequestRow | undefined> {
  return db.transaction(async (tx) => {
    const [row] = await tx
      .update(permissionRequests)
      .set({ ...resolution, answeredAt: new Date() })
      .where(
        and(
          eq(permissionRequests.runId, runId),
          eq(permissionRequests.requestId, requestId),
          eq(permissionRequests.state, "pending"),
        ),
      )
      .returning();
    if (row) await appendFeed(tx, [permissionResolved(row)]);
    return row;
  });
}

/**
 * The input the tool was allowed to run with, when the answer changed it (a client's updated input,
 * a question's answers); undefined when it runs as asked, or not at all.
 */
export function changedInput(row: PermissionRequestRow): Record<string, unknown> | undefined {
  const given = row.answer?.updatedInput;
  if (row.answer?.behavior !== "allow" || typeof given !== "object" || given === null) {
    return undefined;
  }
  return isDeepStrictEqual(given, row.input) ? undefined : (given as Record<string, unknown>);
}

/** Cancels every request of the run still pending (the run ended); their ids. */
export async function cancelPendingRequests(db: Database, runId: string): Promise<string[]> {
  return db.transaction(async (tx) => {
    const rows = await tx
      .update(permissionRequests)
      .set({ state: "cancelled", by: "cancel", answeredAt: new Date() })
      .where(and(eq(permissionRequests.runId, runId), eq(permissionRequests.state, "pending")))
      .returning({
        runId: permissionRequests.runId,
        requestId: permissionRequests.requestId,
        state: permissionRequests.state,
        by: permissionRequests.by,
      });
    await appendFeed(tx, rows.map(permissionResolved));
    return rows.map((r) => r.requestId);
  });
}

/** Adds tool rules to those the session's later runs are allowed (`--allowedTools`). */
export async function allowToolsForSession(
  db: Database,
  sessionId: string,
  rules: readonly string[],
): Promise<void> {
  if (rules.length === 0) return;
  // One statement, so two answers at once cannot drop each other's rules.
  await db
    .update(sessions)
    .set({
      allowedTools: sql`(select coalesce(jsonb_agg(distinct r), '[]'::jsonb) from jsonb_array_elements_text(${sessions.allowedTools} || ${JSON.stringify(rules)}::jsonb) as r)`,
    })
    .where(eq(sessions.id, sessionId));
}
