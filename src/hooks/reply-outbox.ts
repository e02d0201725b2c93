import type { Clock } from "../clock.js";
import { callForge, type ForgeAnswer } from "../forges/api.js";
import { forgeAccessOf } from "../forges/hook-forge.js";
import { type RunReport, readRunEnd, reviewComments } from "../forges/reply-body.js";
import { headLookup, replyCall, UnusableTargetError } from "../forges/reply-calls.js";
import { errorText, type Logger } from "../log.js";
import type { Cidr } from "../net/targets.js";
import { CallbackTargets } from "../net/targets.js";
import type { RunTransactionHook } from "../runs/recording.js";
import type { Database } from "../store/db.js";
import { publicErrorText } from "../store/errors.js";
import { type EventBatch, getCompletionEvent } from "../store/events.js";
import * as store from "../store/replies.js";
import { getRun } from "../store/runs.js";
import type { ReplyRow } from "../store/schema.js";
import {
  LEASE_MARGIN_MS,
  OUTBOX_BATCH,
  OutboxLoop,
  type RetryPolicy,
  retryAfterFailure,
} from "./outbox-loop.js";
import { replyHook } from "./reply-hook.js";

// Sends a run's replies on its forge from the outbox table: the comment made at the run's start,
// updated with its progress and replaced by its result, the check run or commit status, the
// review. Each attempt sends the reply as the run stands then, with the hook's token as it is
// then. A failure is retried with backoff (or when the forge asked, Retry-After and rate limits)
// up to the callback attempts setting; a refusal no retry changes (401, 403, 404, 422) at once
// ends the reply as `failed`. Several instances share the table: a conditional claim takes each
// attempt once.

export interface ReplyOutboxOptions extends RetryPolicy {
  db: Database;
  logger: Logger;
  timeoutMs: number;
  pollMs: number;
  /** The least time between two progress updates of a comment (AGENT_BRIDGE_REPLY_PROGRESS_MS). */
  progressMs: number;
  /** Inside addresses a forge's API may be on all the same (AGENT_BRIDGE_CALLBACK_ALLOW). */
  allow: readonly Cidr[];
  clock?: Clock;
}

type Failure = Extract<ForgeAnswer, { ok: false }>;

/** A failure the bridge met before the forge answered: `final` when no retry can help. */
const failure = (error: string, final: boolean): Failure => ({
  ok: false,
  status: null,
  error,
  final,
  retryAt: null,
});

export class ReplyOutbox {
  private readonly loop: OutboxLoop;
  private readonly targets: CallbackTargets;

  constructor(private readonly opts: ReplyOutboxOptions) {
    this.targets = new CallbackTargets(opts.allow);
    this.loop = new OutboxLoop({
      name: "reply outbox",
      logger: opts.logger,
      pollMs: opts.pollMs,
      ...(opts.clock ? { clock: opts.clock } : {}),
      due: (now) => store.dueReplies(opts.db, now, OUTBOX_BATCH),
      attempt: (id) => this.attempt(id),
    });
  }

  start() {
    this.loop.start();
  }

  /** Looks for due replies now; resolves once a pass that started after the call has finished. */
  poke(): Promise<void> {
    return this.loop.poke();
  }

  /** A run's completion is stored: as CallbackOutbox.completed, for the run's replies. */
  completed(joined: readonly RunTransactionHook[] | undefined): Promise<void> {
    return joined && !joined.includes(replyHook) ? Promise.resolve() : this.poke();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /**
   * A batch of a run's events is stored: at `run_started` its replies fall due, and each tool it
   * starts (a `status` event) makes its comment due, no sooner than `progressMs` after the last.
   */
  async progressed(
    batch: EventBatch,
    joined: readonly RunTransactionHook[] | undefined,
  ): Promise<void> {
    // A run without replies (any but a hook delivery's) costs no statement: on the embedded
    // database each one holds the server's thread, ahead of the run's next events.
    if (joined && !joined.includes(replyHook)) return;
    const started = batch.events.some((event) => event.type === "run_started");
    const statuses = batch.events.filter((event) => event.type === "status");
    if (!started && statuses.length === 0) return;
    const now = new Date(this.loop.clock.now());
    try {
      const tools = statuses
        .map((event) => (JSON.parse(event.json) as { tool_name?: unknown }).tool_name)
        .filter((tool) => typeof tool === "string")
        .map((tool) => tool.slice(0, 200));
      const progress = { started, tools };
      const { db, progressMs } = this.opts;
      const touched = await store.recordReplyProgress(db, batch.runId, progress, now, progressMs);
      if (touched > 0) await this.poke();
    } catch (err) {
      // The run goes on; its replies say the rest at its end.
      this.opts.logger.warn("could not record a run's progress for its replies", {
        run_id: batch.runId,
        error: errorText(err),
      });
    }
  }

  private async attempt(id: string) {
    const { db, logger, timeoutMs } = this.opts;
    const { clock } = this.loop;
    const now = new Date(clock.now());
    // Held for two calls' timeouts: an attempt may look up the head commit before it replies.
    const row = await store.claimReply(
      db,
      id,
      now,
      new Date(now.getTime() + 2 * timeoutMs + LEASE_MARGIN_MS),
    );
    if (!row) return; // another worker took it
    let answer: ForgeAnswer | { skipped: string };
    let body = "";
    try {
      ({ answer, body } = await this.send(row));
    } catch (err) {
      if (err instanceof UnusableTargetError) answer = failure(err.message, true);
      else {
        // Shown on the run: the database's own text (SQL, parameters) stays in the log.
        logger.error("could not prepare a reply", { run_id: row.runId, error: errorText(err) });
        answer = failure(`could not prepare the reply: ${publicErrorText(err)}`, false);
      }
    }
    const at = new Date(clock.now());
    if ("skipped" in answer) await store.recordReplySkipped(db, id, answer.skipped, at);
    else if (answer.ok) await this.posted(row, answer, body, at);
    else await this.failed(row, answer, at);
  }

  private async posted(
    row: ReplyRow,
    answer: Extract<ForgeAnswer, { ok: true }>,
    body: string,
    at: Date,
  ) {
    const json = answer.json as { id?: unknown; html_url?: unknown; web_url?: unknown } | null;
    const objectId =
      typeof json?.id === "number" || typeof json?.id === "string" ? String(json.id) : null;
    const url = [json?.html_url, json?.web_url].find(
      (u): u is string => typeof u === "string" && /^https?:\/\//.test(u),
    );
    await store.recordReplySent(
      this.opts.db,
      row,
      {
        status: answer.status,
        body,
        // A commit status or a review is posted anew each time: only what is updated is kept.
        objectId: row.kind === "comment" || row.kind === "check" ? objectId : null,
        url: url ?? null,
      },
      at,
      new Date(at.getTime() + this.opts.progressMs),
    );
    // A progress update every few seconds of every run would drown the log's other lines.
    const log = row.phase === "final" ? this.opts.logger.info : this.opts.logger.debug;
    log("reply posted", { run_id: row.runId, kind: row.kind, phase: row.phase });
  }

  /** Final at once for a refusal; else retried, when the forge asked or after a backoff. */
  private async failed(row: ReplyRow, answer: Failure, at: Date) {
    const failures = row.failures + 1;
    const next = answer.final
      ? { failed: true, at: at.getTime() }
      : retryAfterFailure(failures, this.opts, at.getTime(), {
          retryAt: answer.retryAt,
          stopped: this.loop.isStopped,
        });
    await store.recordReplyFailure(
      this.opts.db,
      row.id,
      {
        state: next.failed ? "failed" : "pending",
        status: answer.status,
        error: answer.error,
        nextAttemptAt: next.failed ? null : new Date(next.at),
      },
      at,
    );
    this.opts.logger.warn(next.failed ? "reply failed for good" : "reply failed; will retry", {
      run_id: row.runId,
      kind: row.kind,
      failures,
      error: answer.error,
      ...(answer.cause ? { cause: answer.cause } : {}),
      ...(next.failed ? {} : { retry_in_ms: next.at - at.getTime() }),
    });
  }

  /** One attempt: the head commit first when it is needed and unknown, then the reply itself. */
  private async send(
    row: ReplyRow,
  ): Promise<{ answer: ForgeAnswer | { skipped: string }; body: string }> {
    const { db } = this.opts;
    const hook = row.hookId ? await store.replyAccess(db, row.hookId) : undefined;
    const access = hook && forgeAccessOf(hook);
    if (!access || access.forge !== row.target.forge) {
      return { answer: failure("the hook, its forge or its forge_token is gone", true), body: "" };
    }
    const call = (forgeCall: Parameters<typeof callForge>[1]) =>
      callForge(access, forgeCall, {
        targets: this.targets,
        timeoutMs: this.opts.timeoutMs,
        stopping: this.loop.stopping,
        clock: () => this.loop.clock.now(),
      });
    let target = row.target;
    if ((row.kind === "check" || row.kind === "status") && !target.sha) {
      const lookup = headLookup(target);
      const found = await call({ method: "GET", path: lookup.path });
      if (!found.ok) return { answer: found, body: "" };
      const sha = lookup.read(found.json);
      if (typeof sha !== "string") throw new UnusableTargetError("the forge named no head commit");
      target = { ...target, sha };
      await store.setReplyTarget(db, row.id, target);
    }
    const report = await this.report(row);
    const review = row.kind === "review" ? reviewComments(report.end?.structuredOutput) : [];
    const planned = replyCall({ ...row, target }, report, review);
    if ("skip" in planned) return { answer: { skipped: planned.skip }, body: "" };
    return { answer: await call(planned.call), body: planned.body };
  }

  /** The run as it stands: its status, the tools it used, and its end once it has ended. */
  private async report(row: ReplyRow): Promise<RunReport> {
    const run = await getRun(this.opts.db, row.runId);
    if (!run) throw new Error(`run ${row.runId} is gone`);
    const end =
      row.phase === "final" ? readRunEnd(await getCompletionEvent(this.opts.db, row.runId)) : null;
    return {
      runId: row.runId,
      status: run.status === "waiting" ? "queued" : run.status,
      tools: row.tools,
      end,
    };
  }
}
