import { randomUUID } from "node:crypto";
import { and, asc, eq, inArray, lt, lte, or, sql } from "drizzle-orm";
import type { Database } from "./db.js";
import { hooks, type ReplyRow, type ReplyTarget, replies } from "./schema.js";

// The reply outbox: a run's replies on its forge, written with the run, due when there is
// something to say (its start, its progress, its end), taken by one worker for each attempt.

export type ReplyKind = "comment" | "check" | "status" | "review";

export interface NewReply {
  hookId: string;
  kind: ReplyKind;
  target: ReplyTarget;
}

/** The most tool names a reply keeps: the comment shows how many, not every one. */
export const MAX_TOOLS = 200;

export async function insertReplies(db: Database, runId: string, planned: readonly NewReply[]) {
  if (planned.length === 0) return;
  const now = new Date();
  await db.insert(replies).values(
    planned.map((reply) => ({
      id: randomUUID(),
      runId,
      ...reply,
      // A review says only the result: it waits for the end.
      phase: reply.kind === "review" ? "final" : "progress",
      state: "pending",
      createdAt: now,
      updatedAt: now,
    })),
  );
}

/** A time as a statement's parameter (a Date inside raw SQL is not typed by every driver). */
const at = (time: Date) => sql`${time.toISOString()}::timestamptz`;

const open = sql`${replies.state} in ('pending', 'posted')`;

/**
 * The run has started (its replies are due now) or used tools (its comment is due, no sooner
 * than `throttleMs` after it was last sent).
 */
export async function recordReplyProgress(
  db: Database,
  runId: string,
  progress: { started: boolean; tools: string[] },
  now: Date,
  throttleMs: number,
): Promise<number> {
  let touched = 0;
  if (progress.started) {
    const started = await db
      .update(replies)
      .set({
        state: "pending",
        nextAttemptAt: sql`coalesce(${replies.nextAttemptAt}, ${at(now)})`,
        revision: sql`${replies.revision} + 1`,
        updatedAt: now,
      })
      .where(and(eq(replies.runId, runId), eq(replies.phase, "progress"), open))
      .returning({ id: replies.id });
    touched += started.length;
  }
  if (progress.tools.length === 0) return touched;
  const throttled = sql`greatest(${at(now)}, coalesce(${replies.sentAt} + ${`${throttleMs} milliseconds`}::interval, ${at(now)}))`;
  const used = await db
    .update(replies)
    .set({
      tools: sql`case when jsonb_array_length(${replies.tools}) < ${MAX_TOOLS} then ${replies.tools} || ${JSON.stringify(progress.tools)}::jsonb else ${replies.tools} end`,
      state: "pending",
      nextAttemptAt: sql`coalesce(${replies.nextAttemptAt}, ${throttled})`,
      revision: sql`${replies.revision} + 1`,
      updatedAt: now,
    })
    .where(
      and(
        eq(replies.runId, runId),
        eq(replies.kind, "comment"),
        eq(replies.phase, "progress"),
        open,
      ),
    )
    .returning({ id: replies.id });
  return touched + used.length;
}

/** Called in the transaction that records the run's completion: every reply says the result. */
export async function markRepliesFinal(db: Database, runId: string) {
  const now = new Date();
  await db
    .update(replies)
    .set({
      phase: "final",
      state: "pending",
      // A reply waiting out a failure keeps its wait (the forge's Retry-After, the backoff).
      nextAttemptAt: sql`case when ${replies.failures} > 0 then greatest(${replies.nextAttemptAt}, ${at(now)}) else ${at(now)} end`,
      revision: sql`${replies.revision} + 1`,
      updatedAt: now,
    })
    .where(and(eq(replies.runId, runId), open));
}

const due = (now: Date) =>
  and(
    eq(replies.state, "pending"),
    lte(replies.nextAttemptAt, now),
    or(sql`${replies.lockedUntil} is null`, lt(replies.lockedUntil, now)),
  );

export async function dueReplies(db: Database, now: Date, limit: number): Promise<string[]> {
  const rows = await db
    .select({ id: replies.id })
    .from(replies)
    .where(due(now))
    .orderBy(asc(replies.nextAttemptAt))
    .limit(limit);
  return rows.map((r) => r.id);
}

/**
 * Takes the reply for one attempt when it is still due and nobody holds it; the conditional
 * update is the lock, so two workers (or two instances) never send the same attempt.
 */
export async function claimReply(
  db: Database,
  id: string,
  now: Date,
  until: Date,
): Promise<ReplyRow | undefined> {
  const [row] = await db
    .update(replies)
    .set({ lockedUntil: until, attempts: sql`${replies.attempts} + 1` })
    .where(and(eq(replies.id, id), due(now)))
    .returning();
  return row;
}

/** The head commit looked up for a reply whose delivery did not carry it. */
export async function setReplyTarget(db: Database, id: string, target: ReplyTarget) {
  await db.update(replies).set({ target }).where(eq(replies.id, id));
}

/**
 * What a claimed attempt sent. Unless something changed meanwhile (a newer revision: more
 * progress, or the run's end), the reply has sent all there is; else it stays due, a progress
 * update no sooner than `againAt`.
 */
export async function recordReplySent(
  db: Database,
  claimed: ReplyRow,
  sent: { status: number; body: string; objectId: string | null; url: string | null },
  now: Date,
  againAt: Date,
) {
  const unchanged = sql`${replies.revision} = ${claimed.revision}`;
  await db
    .update(replies)
    .set({
      state: sql`case when ${unchanged} then 'posted' else 'pending' end`,
      nextAttemptAt: sql`case when ${unchanged} then null when ${replies.phase} = 'final' then ${at(now)} else greatest(${replies.nextAttemptAt}, ${at(againAt)}) end`,
      objectId: sent.objectId ?? claimed.objectId,
      url: sent.url ?? claimed.url,
      body: sent.body,
      lastStatus: sent.status,
      lastError: null,
      failures: 0,
      lockedUntil: null,
      sentAt: now,
      updatedAt: now,
    })
    .where(eq(replies.id, claimed.id));
}

export async function recordReplyFailure(
  db: Database,
  id: string,
  outcome: {
    state: "pending" | "failed";
    status: number | null;
    error: string;
    nextAttemptAt: Date | null;
  },
  now: Date,
) {
  await db
    .update(replies)
    .set({
      state: outcome.state,
      lastStatus: outcome.status,
      lastError: outcome.error,
      nextAttemptAt: outcome.nextAttemptAt,
      failures: sql`${replies.failures} + 1`,
      lockedUntil: null,
      updatedAt: now,
    })
    .where(eq(replies.id, id));
}

/** A review with no line comments in the result: nothing to post. */
export async function recordReplySkipped(db: Database, id: string, why: string, now: Date) {
  await db
    .update(replies)
    .set({
      state: "skipped",
      lastError: why,
      nextAttemptAt: null,
      lockedUntil: null,
      updatedAt: now,
    })
    .where(eq(replies.id, id));
}

const KIND_ORDER: ReplyKind[] = ["comment", "check", "status", "review"];

/** The replies of each of the runs that has some, in a fixed order of kinds. */
export async function repliesOf(db: Database, runIds: string[]): Promise<Map<string, ReplyRow[]>> {
  const found = new Map<string, ReplyRow[]>();
  if (runIds.length === 0) return found;
  const rows = await db.select().from(replies).where(inArray(replies.runId, runIds));
  rows.sort(
    (a, b) => KIND_ORDER.indexOf(a.kind as ReplyKind) - KIND_ORDER.indexOf(b.kind as ReplyKind),
  );
  for (const row of rows) found.set(row.runId, [...(found.get(row.runId) ?? []), row]);
  return found;
}

/** What a reply is sent with: its hook's forge, API and token, read at each attempt. */
export async function replyAccess(db: Database, hookId: string) {
  const [row] = await db
    .select({ forge: hooks.forge, forgeApiUrl: hooks.forgeApiUrl, forgeToken: hooks.forgeToken })
    .from(hooks)
    .where(eq(hooks.id, hookId));
  return row;
}
