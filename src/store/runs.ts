import { and, eq, inArray, isNotNull, isNull, sql } from "drizzle-orm";
import { type AnyPgColumn, alias, QueryBuilder } from "drizzle-orm/pg-core";
import type { Principal } from "../principal.js";
import type { Database } from "./db.js";
import { newestFirst, olderThan, type PageKey } from "./paging.js";
import { type RunRow, runs, sessions } from "./schema.js";
import { visibleTo } from "./sessions.js";

// Reading runs: one, a page, the active or open runs of a session or an instance. How runs are
// admitted, claimed and recorded as they go are their own modules (run-admission.ts,
// run-claims.ts, run-lifecycle.ts).

/** An id the CLI reported, kept only when it looks like one (printable ASCII, bounded). */
export const cliId = (id: string | null) => (id && /^[\x21-\x7e]{1,200}$/.test(id) ? id : null);

export const ACTIVE_STATUSES = ["queued", "running"] as const;
/** A run in one of these has no completion yet: its log still grows. */
export const OPEN_STATUSES: readonly string[] = [...ACTIVE_STATUSES, "waiting"];
/**
 * OPEN_STATUSES as a list written into a statement, not bound: the planner then reads open runs
 * from their partial indexes.
 */
export const OPEN_STATUSES_LIST = sql.raw(`(${OPEN_STATUSES.map((s) => `'${s}'`).join(", ")})`);

export async function getRun(db: Database, id: string): Promise<RunRow | undefined> {
  const [row] = await db.select().from(runs).where(eq(runs.id, id));
  return row;
}

/** The run, when it exists and the caller may see its session. */
export async function getVisibleRun(
  db: Database,
  id: string,
  principal: Principal,
): Promise<RunRow | undefined> {
  const [row] = await db
    .select({ run: runs })
    .from(runs)
    .innerJoin(sessions, eq(sessions.id, runs.sessionId))
    .where(and(eq(runs.id, id), visibleTo(principal)));
  return row?.run;
}

/** Runs the caller may see, newest first (see paging.ts); of one session when `sessionId` is given. */
export async function listRuns(
  db: Database,
  principal: Principal,
  page: { limit: number; after?: PageKey; sessionId?: string },
): Promise<RunRow[]> {
  const rows = await db
    .select({ run: runs })
    .from(runs)
    .innerJoin(sessions, eq(sessions.id, runs.sessionId))
    .where(
      and(
        visibleTo(principal),
        page.sessionId === undefined ? undefined : eq(runs.sessionId, page.sessionId),
        olderThan(runs.createdAt, runs.id, page.after),
      ),
    )
    .orderBy(...newestFirst(runs.createdAt, runs.id))
    .limit(page.limit);
  return rows.map((row) => row.run);
}

/** The active (queued or running) run of each of the sessions that has one. */
export async function activeRunIds(
  db: Database,
  sessionIds: string[],
): Promise<Map<string, string>> {
  if (sessionIds.length === 0) return new Map();
  const rows = await db
    .select({ sessionId: runs.sessionId, id: runs.id })
    .from(runs)
    .where(and(inArray(runs.sessionId, sessionIds), inArray(runs.status, [...ACTIVE_STATUSES])));
  return new Map(rows.map((row) => [row.sessionId, row.id]));
}

export async function getActiveRun(db: Database, sessionId: string): Promise<RunRow | undefined> {
  const [row] = await db
    .select()
    .from(runs)
    .where(and(eq(runs.sessionId, sessionId), inArray(runs.status, [...ACTIVE_STATUSES])));
  return row;
}

/**
 * The runs an instance (null: a version before instances) left queued, running or waiting; not
 * the queued runs left for any instance to claim (those have a handover).
 */
export async function unfinishedRuns(db: Database, instanceId: string | null): Promise<RunRow[]> {
  return db
    .select()
    .from(runs)
    .where(
      and(
        instanceId === null
          ? and(isNull(runs.instanceId), isNull(runs.handover))
          : eq(runs.instanceId, instanceId),
        inArray(runs.status, [...OPEN_STATUSES]),
      ),
    );
}

/** The session's runs that have no completion yet, whichever instance executes them. */
export async function openRunsOf(db: Database, sessionId: string): Promise<RunRow[]> {
  return db
    .select()
    .from(runs)
    .where(and(eq(runs.sessionId, sessionId), inArray(runs.status, [...OPEN_STATUSES])));
}

/**
 * Whether an earlier run of the session was started, so that the CLI may hold its session and the
 * next run resumes it. Not whether a CLI session id was recorded: the CLI keeps a conversation
 * from before its first line reaches the bridge (a run cancelled or killed early, or whose server
 * died, has none recorded), and when there is none to resume, the runner starts it instead
 * (claude/resume.ts). Asked when no other run of the session can be active: at admission, or when
 * a waiting run takes its turn.
 */
export function cliSessionStarted(sessionId: AnyPgColumn | string) {
  const earlier = alias(runs, "earlier");
  return sql<boolean>`exists (${new QueryBuilder()
    .select({ id: earlier.id })
    .from(earlier)
    .where(and(eq(earlier.sessionId, sessionId), isNotNull(earlier.startedAt)))})`;
}
