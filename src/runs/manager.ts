import { createHash } from "node:crypto";
import { Effort, PermissionMode } from "../agents/claude/options.js";
import { type RunnerConfig, runClaude } from "../agents/claude/runner.js";
import {
  BudgetExhaustedError,
  PolicyDeniedError,
  type RunAllowance,
  type RunGate,
} from "../auth/policy.js";
import { type BridgeEvent, bareCompletion, type CompletionEvent } from "../events.js";
import type { Logger } from "../log.js";
import type { Metrics } from "../metrics.js";
import { bootId, terminateGroup } from "../process/groups.js";
import type { TenantHomes } from "../process/tenant-homes.js";
import type { Database } from "../store/db.js";
import { describeDbError, uniqueViolation } from "../store/errors.js";
import { type LogView, lastEventSeqs, type SequencedEvent } from "../store/events.js";
import { insertCallback } from "../store/hooks.js";
import { DatabaseOutageError } from "../store/retry.js";
import * as store from "../store/runs.js";
import type { RunRow, SessionRow } from "../store/schema.js";
import { prepareSessionWorktree, recordSessionWorktree } from "../worktrees/sessions.js";
import {
  IdempotencyConflictError,
  KeyRunLimitError,
  QueueFullError,
  RunFinishedError,
  SessionBusyError,
  SessionExpiredError,
  SessionGoneError,
  ShuttingDownError,
} from "./errors.js";
import { LogWriter } from "./log-writer.js";
import { CompletionRecorder } from "./recording.js";
import { RunLog } from "./run-log.js";
import { readStoredLog } from "./stored-log.js";

export interface RunManagerOptions {
  db: Database;
  logger: Logger;
  runner: RunnerConfig;
  workDir: string;
  maxConcurrent: number;
  maxQueued: number;
  /** Runs (running and queued) one API key may have at once. */
  maxPerKey: number;
  /** How long a run's writes wait for an unreachable database before the run fails. */
  dbOutageBoundMs: number;
  metrics: Metrics;
  /** Whether the session's key may run now, and what a run may spend. */
  gate: RunGate;
  /** Set: the agents run as another OS user, each tenant in a HOME of its own. */
  homes?: TenantHomes;
}

export interface Message {
  text: string;
  systemPrompt: string | null;
  trigger: string;
  idempotencyKey: string | null;
  /**
   * When the session has an active run: wait in line for the session (the run is `waiting`)
   * rather than be refused with SessionBusyError. Webhook deliveries wait; messages do not.
   */
  waitForSession?: boolean;
  /** Where to POST the run's outcome once it completes (an outbox row written with the run). */
  callback?: { url: string; secret: string } | null;
}

const IDEMPOTENCY_WINDOW_MS = 24 * 60 * 60 * 1000;

interface ActiveRun {
  row: RunRow;
  session: SessionRow;
  log: RunLog;
  abort: AbortController;
  /** In line for its session (status `waiting`), not yet in the run queue. */
  waiting: boolean;
  /** Resumes the CLI's session: known when no other run of the session can be active. */
  resume: boolean;
  /** An outbox row for a callback was written with the run (see Message.callback). */
  hasCallback: boolean;
  /** Set when the server's shutdown, not a client, ended the run. */
  interruptedBy?: string;
  /** A client cancelled the run before its outcome was known: it ends `cancelled`. */
  cancelled?: boolean;
  /** The run's outcome, once known: from then on it can no longer be cancelled. */
  outcome?: CompletionEvent["status"];
  /** Resolves once the run's CLI is gone and its slot is free. */
  finished: Promise<void>;
  markFinished: () => void;
}

/**
 * Owns every run: queues it, starts the runner when a slot is free, numbers and stores its events,
 * fans them out, and records the outcome. Routes only submit, subscribe and cancel.
 */
export class RunManager {
  private readonly active = new Map<string, ActiveRun>();
  private readonly queue: ActiveRun[] = [];
  /** Runs waiting for their session to be free, per session, oldest first. */
  private readonly waiting = new Map<string, ActiveRun[]>();
  private waitingPoll: NodeJS.Timeout | undefined;
  private readonly completionListeners = new Set<(runId: string) => void>();
  private running = 0;
  /** Clients following a run's events. */
  private subscribers = 0;
  private admitting = 0;
  private readonly admissions = new Map<string, Promise<void>>();
  private accepting = true;
  /** Sessions being deleted: no message is admitted to them any more. */
  private readonly deleting = new Set<string>();
  /** Logs of finished runs whose completion is published but not stored yet. */
  private readonly unrecorded = new Map<string, RunLog>();
  private readonly writer: LogWriter;
  private readonly recorder: CompletionRecorder;

  constructor(private readonly opts: RunManagerOptions) {
    this.writer = new LogWriter(opts.db, opts.logger, opts.dbOutageBoundMs, {
      metrics: opts.metrics,
    });
    this.recorder = new CompletionRecorder({
      db: opts.db,
      logger: opts.logger,
      outageBoundMs: opts.dbOutageBoundMs,
      onSettled: (runId, stored) => {
        this.unrecorded.delete(runId);
        if (stored) this.notifyCompletion(runId);
      },
    });
    opts.metrics.watchRuns(() => ({
      running: this.running,
      queued: this.queue.length,
      waiting: this.waitingCount(),
      subscribers: this.subscribers,
    }));
  }

  /** Called after each run's completion is stored (the callback outbox listens). */
  onCompletion(listener: (runId: string) => void): () => void {
    this.completionListeners.add(listener);
    return () => this.completionListeners.delete(listener);
  }

  /** Creates and queues a run for the session; with an idempotency key, may return an earlier one. */
  async submit(session: SessionRow, message: Message): Promise<{ run: RunRow; created: boolean }> {
    // Messages to one session are admitted one after the other, so that of several racing, one
    // gets the run and the rest see it (409) rather than competing for queue places (429). The
    // unique index on active runs still guards against other processes.
    return this.inAdmissionOrder(session.id, () => this.admit(session, message));
  }

  /** True while a run of the session is waiting, queued or running in this process. */
  isActive(sessionId: string): boolean {
    return this.holdsSession(sessionId) || this.waiting.has(sessionId);
  }

  /**
   * Calls `task` in the session's admission order when the session has no active run (else
   * resolves undefined without calling it): a message arriving meanwhile waits for `task` and
   * sees what it did. The sweep expires sessions through this.
   */
  whenIdle<T>(sessionId: string, task: () => Promise<T>): Promise<T | undefined> {
    return this.inAdmissionOrder(sessionId, async () => {
      if (this.isActive(sessionId) || (await store.getActiveRun(this.opts.db, sessionId))) {
        return undefined;
      }
      return task();
    });
  }

  /**
   * Deletes a session in its admission order: no message is admitted meanwhile or after, its
   * waiting and active runs are cancelled (their CLIs gone) before `remove` deletes what is left,
   * so that no run outlives the rows it writes to, nor makes a worktree again after `remove`.
   */
  deleteSession<T>(sessionId: string, remove: () => Promise<T>): Promise<T> {
    return this.inAdmissionOrder(sessionId, async () => {
      this.deleting.add(sessionId);
      try {
        await this.cancelWaiting(sessionId);
        for (const run of [...this.active.values()]) {
          if (run.session.id !== sessionId) continue;
          // A run whose outcome is already known refuses the cancel: wait for its end all the same.
          await this.cancel(run.row.id).catch(() => {});
          await run.finished;
        }
        return await remove();
      } finally {
        this.deleting.delete(sessionId);
      }
    });
  }

  private inAdmissionOrder<T>(sessionId: string, task: () => Promise<T>): Promise<T> {
    const previous = this.admissions.get(sessionId) ?? Promise.resolve();
    const admitted = previous.then(task);
    const settled = admitted.then(
      () => {},
      () => {},
    );
    this.admissions.set(sessionId, settled);
    void settled.then(() => {
      if (this.admissions.get(sessionId) === settled) this.admissions.delete(sessionId);
    });
    return admitted;
  }

  private async admit(
    session: SessionRow,
    message: Message,
  ): Promise<{ run: RunRow; created: boolean }> {
    if (!this.accepting) throw new ShuttingDownError();
    if (this.deleting.has(session.id)) throw new SessionGoneError(session.id);
    const { db } = this.opts;
    // Read again rather than trusting `session`: the sweep may have expired it since.
    const state = await store.admissionState(db, session.id);
    if (!state) throw new SessionGoneError(session.id);
    if (state.expired) throw new SessionExpiredError(session.id);
    const requestHash = message.idempotencyKey ? hashMessage(message) : null;
    if (message.idempotencyKey) {
      const earlier = await this.findIdempotent(session.id, message.idempotencyKey, requestHash);
      if (earlier) return { run: earlier, created: false };
    }
    // Runs already waiting for the session go first: a newcomer may not overtake them.
    const inLine = this.waiting.get(session.id)?.[0];
    if (!message.waitForSession) {
      if (state.activeRunId) throw new SessionBusyError(state.activeRunId);
      if (inLine) throw new SessionBusyError(inLine.row.id);
    }
    let wait = Boolean(state.activeRunId || inLine);
    await this.opts.gate.allow(session);
    if (session.ownerKeyId && this.activeRunsOf(session.ownerKeyId) >= this.opts.maxPerKey) {
      throw new KeyRunLimitError(this.opts.maxPerKey, this.retryAfterSeconds());
    }
    const capacity = this.opts.maxConcurrent + this.opts.maxQueued;
    if (this.running + this.queue.length + this.waitingCount() + this.admitting >= capacity) {
      throw new QueueFullError(capacity, this.retryAfterSeconds());
    }
    // Holds a place while the row is written, so that concurrent submits cannot overfill.
    this.admitting++;
    let row: RunRow;
    try {
      const insert = (status: "queued" | "waiting") => {
        const run = {
          sessionId: session.id,
          status,
          trigger: message.trigger,
          prompt: message.text,
          systemPrompt: message.systemPrompt,
          idempotencyKey: message.idempotencyKey,
          requestHash,
        };
        const { callback } = message;
        if (!callback) return store.insertRun(db, run);
        // With the run, so that no completion can ever find its callback missing.
        return db.transaction(async (tx) => {
          const inserted = await store.insertRun(tx, run);
          await insertCallback(tx, { runId: inserted.id, ...callback });
          return inserted;
        });
      };
      try {
        row = await insert(wait ? "waiting" : "queued");
      } catch (err) {
        // Another process (or a run admitted meanwhile) took the session: wait behind it.
        if (!message.waitForSession || uniqueViolation(err) !== "runs_one_active_per_session")
          throw err;
        wait = true;
        row = await insert("waiting");
      }
    } catch (err) {
      const constraint = uniqueViolation(err);
      if (constraint === "runs_one_active_per_session") {
        const activeRun = await store.getActiveRun(db, session.id);
        throw new SessionBusyError(activeRun?.id ?? "unknown");
      }
      if (constraint === "runs_session_idempotency_key" && message.idempotencyKey) {
        // Another request with the same key won the race; answer as it was answered.
        const earlier = await this.findIdempotent(session.id, message.idempotencyKey, requestHash);
        if (earlier) return { run: earlier, created: false };
      }
      throw err;
    } finally {
      this.admitting--;
    }
    let markFinished = () => {};
    const finished = new Promise<void>((resolve) => {
      markFinished = resolve;
    });
    const run: ActiveRun = {
      row,
      session,
      log: new RunLog(this.writer, row.id, db),
      abort: new AbortController(),
      waiting: wait,
      // Asked again when a waiting run takes its turn.
      resume: state.resume,
      hasCallback: Boolean(message.callback),
      finished,
      markFinished,
    };
    this.active.set(row.id, run);
    if (wait) this.enqueueWaiting(run);
    else if (this.running < this.opts.maxConcurrent) this.start(run);
    else this.queue.push(run);
    return { run: row, created: true };
  }

  private waitingCount(): number {
    let n = 0;
    for (const line of this.waiting.values()) n += line.length;
    return n;
  }

  private enqueueWaiting(run: ActiveRun) {
    const line = this.waiting.get(run.session.id) ?? [];
    line.push(run);
    this.waiting.set(run.session.id, line);
    // The run in the way may belong to another process, whose end this one never sees: look again
    // now and then. (A run of this process that ends releases its session at once.)
    this.waitingPoll ??= setInterval(() => {
      for (const sessionId of this.waiting.keys()) {
        if (!this.holdsSession(sessionId)) this.release(sessionId);
      }
    }, 1000).unref();
  }

  /** Whether a run of this process is queued or running on the session (not just waiting). */
  private holdsSession(sessionId: string): boolean {
    for (const run of this.active.values()) {
      if (run.session.id === sessionId && !run.waiting) return true;
    }
    return false;
  }

  private removeWaiting(run: ActiveRun) {
    const line = this.waiting.get(run.session.id);
    if (line) {
      const at = line.indexOf(run);
      if (at >= 0) line.splice(at, 1);
      if (line.length === 0) this.waiting.delete(run.session.id);
    }
    if (this.waiting.size === 0 && this.waitingPoll) {
      clearInterval(this.waitingPoll);
      this.waitingPoll = undefined;
    }
  }

  /** The session is free here: the first run waiting for it moves to the run queue. */
  private release(sessionId: string) {
    if (!this.accepting || !this.waiting.has(sessionId)) return;
    void this.inAdmissionOrder(sessionId, () => this.promote(sessionId)).catch((err) =>
      this.opts.logger.error("could not start a run waiting for its session", {
        session_id: sessionId,
        error: String(err),
      }),
    );
  }

  private async promote(sessionId: string) {
    const next = this.waiting.get(sessionId)?.[0];
    if (!next || !this.accepting || this.holdsSession(sessionId)) return;
    let promoted: Awaited<ReturnType<typeof store.promoteWaitingRun>>;
    try {
      promoted = await store.promoteWaitingRun(this.opts.db, next.row.id);
    } catch (err) {
      // Another process still has a run on the session: keep waiting (the poll looks again).
      if (uniqueViolation(err) === "runs_one_active_per_session") return;
      throw err;
    }
    this.removeWaiting(next);
    if (!promoted) {
      // The row is gone (its session was deleted): nothing to run.
      this.active.delete(next.row.id);
      next.markFinished();
      return;
    }
    next.row = promoted.run;
    next.resume = promoted.resume;
    next.waiting = false;
    if (this.running < this.opts.maxConcurrent) this.start(next);
    else this.queue.push(next);
  }

  /** Cancels the runs waiting for the session (before it is deleted). */
  async cancelWaiting(sessionId: string): Promise<void> {
    for (const run of [...(this.waiting.get(sessionId) ?? [])]) await this.cancel(run.row.id);
  }

  /**
   * The run's events after position `after` of the view, then live ones until its completion, in
   * batches of consecutive events.
   */
  async *events(
    runId: string,
    view: LogView,
    after: number,
    signal?: AbortSignal,
  ): AsyncGenerator<SequencedEvent[]> {
    const live = this.active.get(runId)?.log ?? this.unrecorded.get(runId);
    this.subscribers++;
    try {
      if (live) yield* live.subscribe(view, after, signal);
      else yield* readStoredLog(this.opts.db, runId, view, after);
    } finally {
      this.subscribers--;
    }
  }

  /** Stops a queued or running run; it ends `cancelled` with its completion event. */
  async cancel(runId: string): Promise<void> {
    const run = this.active.get(runId);
    if (!run) {
      const row = await store.getRun(this.opts.db, runId);
      throw new RunFinishedError(runId, row?.status ?? "unknown");
    }
    // Its outcome is known, its completion on the way: too late to cancel. Answered once the run
    // is over, so that the client then reads it finished.
    if (run.outcome) {
      const { outcome } = run;
      await run.finished;
      throw new RunFinishedError(runId, outcome);
    }
    if (run.waiting) {
      this.removeWaiting(run);
      await this.finishUnstarted(run, "cancelled", "cancelled while it waited for its session");
      return;
    }
    const queued = this.queue.indexOf(run);
    if (queued >= 0) {
      this.queue.splice(queued, 1);
      await this.finishUnstarted(run, "cancelled", "cancelled before it started");
      this.release(run.session.id);
      return;
    }
    run.cancelled = true;
    run.abort.abort();
    await run.finished;
  }

  /**
   * Closes the runs a previous process left queued or running: their process groups are killed
   * and each gets an `interrupted` completion, which frees its session.
   */
  async recover(): Promise<number> {
    const { db, logger } = this.opts;
    const left = await store.unfinishedRuns(db);
    for (const row of left) {
      // Only a group of this boot can still be the CLI's; after a reboot the number is anyone's.
      if (row.pgid && row.pgidBootId === bootId()) {
        await terminateGroup(row.pgid, this.opts.runner.killGraceMs, logger);
      }
      const last = await lastEventSeqs(db, row.id);
      // Whether the run had a callback is not known here: mark it due if there is one.
      await this.recorder.record(
        row,
        { seq: last.seq + 1, publicSeq: last.publicSeq + 1 },
        bareCompletion("interrupted", "the server stopped before the run finished"),
        true,
      );
      logger.warn("closed a run left unfinished by a previous process", { run_id: row.id });
    }
    return left.length;
  }

  /**
   * Stops taking runs, lets running ones finish for up to `graceMs`, then stops them; every run
   * gets its completion before this resolves.
   */
  async shutdown(graceMs: number): Promise<void> {
    this.accepting = false;
    const waiting = [...this.waiting.values()].flat();
    for (const run of waiting) this.removeWaiting(run);
    for (const run of [...this.queue.splice(0), ...waiting]) {
      await this.finishUnstarted(run, "interrupted", "the server shut down before the run started");
    }
    const all = () => Promise.all([...this.active.values()].map((r) => r.finished));
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([all(), new Promise((r) => (timer = setTimeout(r, graceMs)))]);
    clearTimeout(timer);
    for (const run of this.active.values()) {
      // One whose outcome is known is finishing: it ends as it did.
      if (run.outcome) continue;
      run.interruptedBy = "the server shut down before the run finished";
      run.abort.abort();
    }
    await all();
    // A completion the database would not take yet gets one more try; recovery does the rest.
    await this.recorder.flush();
  }

  private start(run: ActiveRun) {
    this.running++;
    // execute() never rejects: a run's end is recorded (or kept for later) inside it.
    void this.execute(run).then(() => {
      this.running--;
      this.active.delete(run.row.id);
      run.markFinished();
      const next = this.queue.shift();
      if (next) this.start(next);
      this.release(run.session.id);
    });
  }

  /**
   * Runs the CLI and relays its events to the log until its outcome is known, publishes the
   * completion at once, and only then waits for the CLI's process group to be gone (a CLI that
   * ignores SIGTERM costs its slot the kill's grace period, not the client its answer).
   */
  private async execute(run: ActiveRun) {
    const { db, logger } = this.opts;
    const { row, session } = run;
    const startedAt = new Date();
    // Recorded while the CLI starts: recovery closes queued and running runs alike, and the run's
    // end is recorded only after this (one statement less before the first event).
    const marking = store
      .markRunning(db, row.id, startedAt)
      .catch((err) =>
        logger.error("could not mark the run running", { run_id: row.id, error: String(err) }),
      );
    run.log.append({
      type: "run_started",
      run_id: row.id,
      session_id: session.id,
      trigger: row.trigger,
      queued_ms: Math.max(0, startedAt.getTime() - row.createdAt.getTime()),
    });
    let events: AsyncGenerator<BridgeEvent[]> | undefined;
    let completion: CompletionEvent | undefined;
    try {
      // Asked again: the key's other runs may have spent its budget while this one was queued.
      const allowance = await this.opts.gate.allow(session);
      if (session.worktree) await this.prepareWorktree(session);
      events = await this.runCli(run, allowance);
      completion = await this.relay(run, events);
      await run.log.drain();
    } catch (err) {
      const refusal = this.refusedAtStart(run, err);
      // Stored before its completion, as for any run that ends without its CLI.
      if (refusal) await run.log.drain().catch(() => {});
      completion = refusal ?? this.failure(run, err, completion);
    }
    // Before the completion goes out, so that a client reading the session then sees the record.
    if (session.worktree) await this.recordWorktree(session);
    if (run.interruptedBy) completion = ended(completion, "interrupted", run.interruptedBy);
    else if (run.cancelled) completion = ended(completion, "cancelled", "cancelled by a client");
    await marking;
    await this.complete(run, completion);
    try {
      // Lets the runner stop the CLI's group; resolves once it is gone.
      await events?.return(undefined);
    } catch (err) {
      logger.error("stopping the CLI failed", { run_id: row.id, error: String(err) });
    }
  }

  private async runCli(
    run: ActiveRun,
    allowance: RunAllowance,
  ): Promise<AsyncGenerator<BridgeEvent[]>> {
    const { db, logger, homes } = this.opts;
    const { row, session } = run;
    const identity = await homes?.identityFor(session.ownerKeyId);
    return runClaude(
      {
        prompt: row.prompt,
        claudeSessionId: session.id,
        resume: run.resume,
        ...(session.worktree ? { worktree: session.id } : {}),
        permissionMode: PermissionMode.parse(session.permissionMode),
        effort: Effort.parse(session.effort),
        ...(session.model ? { model: session.model } : {}),
        ...systemPrompt(session.systemPrompt, row.systemPrompt),
        ...(allowance.maxBudgetUsd !== null ? { maxBudgetUsd: allowance.maxBudgetUsd } : {}),
        cwd: this.workDirOf(session),
        ...(identity ? { identity } : {}),
      },
      {
        ...this.opts.runner,
        logger: logger.child({ run_id: row.id }),
        onSpawn: (pgid) =>
          void store.setRunPgid(db, row.id, pgid, bootId()).catch((err) =>
            logger.warn("could not record the CLI's process group", {
              run_id: row.id,
              error: String(err),
            }),
          ),
      },
      run.abort.signal,
    );
  }

  /** Appends the runner's events to the log until its completion, which it returns. */
  private async relay(run: ActiveRun, events: AsyncGenerator<BridgeEvent[]>) {
    for (;;) {
      const next = await events.next();
      if (next.done) return bareCompletion("failed", "the runner ended without a completion");
      for (const event of next.value) {
        if (event.type !== "completion") {
          run.log.append(event);
          continue;
        }
        // Decided here, in one place: a cancel that comes after this is too late (409).
        run.outcome = run.cancelled ? "cancelled" : event.status;
        return event;
      }
      await run.log.keepPace();
    }
  }

  /** The completion of a run its key's gate refused when its turn came (nothing was started). */
  private refusedAtStart(run: ActiveRun, err: unknown): CompletionEvent | undefined {
    const code =
      err instanceof BudgetExhaustedError
        ? "budget_exhausted"
        : err instanceof PolicyDeniedError
          ? "policy_denied"
          : undefined;
    if (!code) return undefined;
    run.outcome = run.cancelled ? "cancelled" : "failed";
    return { ...bareCompletion("failed", (err as Error).message), error_code: code };
  }

  /**
   * The completion of a run that failed in the bridge rather than in the CLI; what the CLI
   * reported (`reported`: its spend above all) is kept when it got that far.
   */
  private failure(run: ActiveRun, err: unknown, reported?: CompletionEvent): CompletionEvent {
    const { logger } = this.opts;
    let error: string;
    if (err instanceof DatabaseOutageError || run.log.hasFailed()) {
      error = `the run's events could not be stored: ${
        err instanceof DatabaseOutageError ? err.message : describeDbError(err)
      }`;
      logger.error("a run's event log could not be stored", { run_id: run.row.id, error });
    } else {
      error = "the bridge failed running the CLI; see its log";
      logger.error("run failed unexpectedly", { run_id: run.row.id, error: String(err) });
    }
    run.outcome = run.cancelled ? "cancelled" : "failed";
    return reported
      ? { ...reported, status: "failed", is_error: true, error }
      : bareCompletion("failed", error);
  }

  /** A failure here is logged, not fatal: the CLI then makes a fresh worktree by itself. */
  private async prepareWorktree(session: SessionRow) {
    const { logger } = this.opts;
    try {
      await prepareSessionWorktree(this.workDirOf(session), session.id, logger);
    } catch (err) {
      logger.error("could not restore the session's worktree", {
        session_id: session.id,
        error: String(err),
      });
    }
  }

  private async recordWorktree(session: SessionRow) {
    try {
      await recordSessionWorktree(this.opts.db, this.workDirOf(session), session.id);
    } catch (err) {
      this.opts.logger.error("could not record the session's worktree", {
        session_id: session.id,
        error: String(err),
      });
    }
  }

  private workDirOf(session: SessionRow): string {
    return session.workDir ?? this.opts.workDir;
  }

  private async finishUnstarted(
    run: ActiveRun,
    status: "cancelled" | "interrupted",
    reason: string,
  ) {
    run.outcome = status;
    run.log.append({
      type: "run_started",
      run_id: run.row.id,
      session_id: run.session.id,
      trigger: run.row.trigger,
      queued_ms: Math.max(0, Date.now() - run.row.createdAt.getTime()),
    });
    await run.log.drain().catch(() => {});
    await this.complete(run, bareCompletion(status, reason));
    this.active.delete(run.row.id);
    run.markFinished();
  }

  /** Records the run's end and publishes its completion; never rejects. */
  private async complete(run: ActiveRun, completion: CompletionEvent) {
    const at = run.log.completionPosition();
    const { entry, state } = await this.recorder.record(run.row, at, completion, run.hasCallback);
    run.log.close(entry);
    this.opts.metrics.runFinished(completion);
    if (state === "stored") this.notifyCompletion(run.row.id);
    else if (state === "pending") this.unrecorded.set(run.row.id, run.log);
  }

  private notifyCompletion(runId: string) {
    for (const listener of this.completionListeners) {
      try {
        listener(runId);
      } catch (err) {
        this.opts.logger.error("a completion listener failed", {
          run_id: runId,
          error: String(err),
        });
      }
    }
  }

  private async findIdempotent(sessionId: string, key: string, requestHash: string | null) {
    const { db } = this.opts;
    const earlier = await store.findRunByIdempotencyKey(db, sessionId, key);
    if (!earlier) return undefined;
    if (Date.now() - earlier.createdAt.getTime() > IDEMPOTENCY_WINDOW_MS) {
      await store.expireIdempotencyKey(
        db,
        sessionId,
        key,
        new Date(Date.now() - IDEMPOTENCY_WINDOW_MS),
      );
      return undefined;
    }
    if (earlier.requestHash !== requestHash) throw new IdempotencyConflictError(earlier.id);
    return earlier;
  }

  private activeRunsOf(keyId: string): number {
    let n = 0;
    for (const run of this.active.values()) if (run.session.ownerKeyId === keyId) n++;
    return n;
  }

  /** A rough wait: each run ahead in the queue is assumed to take 30 s of one slot. */
  private retryAfterSeconds(): number {
    return Math.max(1, Math.ceil((this.queue.length + 1) / this.opts.maxConcurrent) * 30);
  }
}

function systemPrompt(sessionPrompt: string | null, messagePrompt: string | null) {
  const parts = [sessionPrompt, messagePrompt].filter((p): p is string => Boolean(p));
  return parts.length ? { appendSystemPrompt: parts.join("\n\n") } : {};
}

function hashMessage(message: Message): string {
  return createHash("sha256")
    .update(JSON.stringify([message.text, message.systemPrompt]))
    .digest("hex");
}

/** The completion with its status changed by the bridge (a cancel, a shutdown), spend kept. */
function ended(
  completion: CompletionEvent,
  status: "cancelled" | "interrupted",
  error: string,
): CompletionEvent {
  return { ...completion, status, is_error: true, error };
}
