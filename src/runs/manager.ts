import { type Context, context } from "@opentelemetry/api";
import type { AgentRegistry } from "../agents/registry.js";
import type { RunGate } from "../auth/policy.js";
import { ClaimLedger } from "../cluster/claim-ledger.js";
import { Claimer } from "../cluster/claims.js";
import { stopElsewhere } from "../cluster/commands.js";
import type { Doorbell } from "../cluster/doorbell.js";
import type { DeadInstance } from "../cluster/lease.js";
import { followElsewhere } from "../cluster/remote-follower.js";
import { errorText, type Logger } from "../log.js";
import type { Metrics } from "../metrics.js";
import { ANONYMOUS_ADMIN } from "../principal.js";
import type { TenantHomes } from "../process/tenant-homes.js";
import { postRunCommand, type RunCommand } from "../store/commands.js";
import type { Database } from "../store/db.js";
import { uniqueViolation } from "../store/errors.js";
import { type LogView, positionIn, type SequencedEvent } from "../store/events.js";
import { countLiveInstances } from "../store/instances.js";
import { withDbRetries } from "../store/retry.js";
import { admissionState, promoteWaitingRun, retryPoint } from "../store/run-admission.js";
import {
  claimQueuedRun,
  claimRun,
  claimStrandedRuns,
  releaseRun,
  ringForWork,
} from "../store/run-claims.js";
import { getActiveRun, getRun, OPEN_STATUSES, openRunsOf } from "../store/runs.js";
import type { RunRow, SessionRow } from "../store/schema.js";
import { getSession, sessionSettings } from "../store/sessions.js";
import { getSessionWorktree } from "../store/worktrees.js";
import type { DebugCapture } from "../telemetry/capture.js";
import type { Tracing } from "../telemetry/tracing.js";
import type { GitRunner } from "../worktrees/git.js";
import { ActiveRun } from "./active-run.js";
import { Admission } from "./admission.js";
import { Approvals, type ClientReply } from "./approvals.js";
import {
  CompletionsUnstoredError,
  RunFinishedError,
  RunNotLatestError,
  SessionBusyError,
  SessionExpiredError,
  SessionGoneError,
  WorktreeHostGoneError,
} from "./errors.js";
import { Execution } from "./execution.js";
import { fromHandover, toHandover } from "./handover.js";
import { findIdempotentRun, messageHash } from "./idempotency.js";
import { LogWriter } from "./log-writer.js";
import { type Message, NO_RUN_OPTIONS, runSettings } from "./message.js";
import { CompletionRecorder, type RunTransactionHook, recordRun } from "./recording.js";
import { reapRuns } from "./recovery.js";
import { RunLog } from "./run-log.js";

/**
 * How long a cancelled run's CLI has to end its turn, once asked, before its group is killed: a
 * cancel is to stop the run now, and a CLI that answers ends its turn well within it.
 */
const CANCEL_GRACE_MS = 2000;

export interface RunManagerOptions {
  db: Database;
  logger: Logger;
  agents: AgentRegistry;
  /** Time between SIGTERM and SIGKILL when a group left by an earlier process is stopped. */
  killGraceMs: number;
  /** How long a permission request waits when its session sets no timeout. */
  approvalTimeoutSeconds: number;
  workDir: string;
  maxConcurrent: number;
  maxQueued: number;
  /** Runs (running, queued and waiting) one API key may have at once. */
  maxPerKey: number;
  /** How long a run's writes wait for an unreachable database before the run fails. */
  dbOutageBoundMs: number;
  metrics: Metrics;
  /** Whether the session's key may run now, and what a run may spend. */
  gate: RunGate;
  /** Set: the agents run as another OS user, each tenant in a HOME of its own. */
  homes?: TenantHomes;
  /** Runs git in a worktree session's repository as its tenant. */
  git: GitRunner;
  /** Work that joins each run's transactions (the callback outbox's). */
  transactionHooks: readonly RunTransactionHook[];
  /** The id of this instance (src/cluster/), written on each run it admits. */
  instanceId: () => string;
  /** The host this instance runs on: worktree sessions' runs run on theirs. */
  host: string;
  /** How runs other instances execute are followed and reached (src/cluster/doorbell.ts). */
  doorbell: Doorbell;
  /** Spans of runs, when tracing is on. */
  tracing: Tracing;
  /** Set: each run's raw CLI output and events are written to files (AGENT_BRIDGE_DEBUG_CAPTURE). */
  capture?: DebugCapture;
}

/**
 * What the routes use of runs: submit, follow, cancel. It wires the parts: a message is written
 * and admitted (admission.ts), runs in its turn (execution.ts), and its end is recorded
 * (recording.ts); events go to the run's log (run-log.ts) and from there to its subscribers.
 */
export class RunManager {
  /** The permission requests of this process's runs, and their answers. */
  readonly approvals: Approvals;
  private readonly admission: Admission<ActiveRun>;
  private readonly execution: Execution;
  private readonly recorder: CompletionRecorder;
  private readonly writer: LogWriter;
  private readonly claimer: Claimer;
  /** This instance's claims of runs queued in the database, and giving back the failed ones. */
  private readonly claims: ClaimLedger;
  /** Followers reading a run from the stored log, told when this instance claims it. */
  private readonly followersOf = new Map<string, Set<AbortController>>();
  private readonly completionListeners = new Set<(runId: string) => void>();
  /** Clients following a run's events. */
  private subscribers = 0;

  constructor(private readonly opts: RunManagerOptions) {
    this.writer = new LogWriter(opts.db, opts.logger, opts.dbOutageBoundMs, {
      metrics: opts.metrics,
      ring: opts.doorbell.rings,
    });
    this.recorder = new CompletionRecorder({
      db: opts.db,
      logger: opts.logger,
      outageBoundMs: opts.dbOutageBoundMs,
      ring: opts.doorbell.rings,
      onSettled: (runId, stored) => this.execution.settled(runId, stored),
    });
    this.approvals = new Approvals({
      db: opts.db,
      logger: opts.logger,
      timeoutSeconds: opts.approvalTimeoutSeconds,
    });
    this.execution = new Execution({
      approvals: this.approvals,
      db: opts.db,
      logger: opts.logger,
      agents: opts.agents,
      gate: opts.gate,
      homes: opts.homes,
      git: opts.git,
      workDir: opts.workDir,
      host: opts.host,
      metrics: opts.metrics,
      recorder: this.recorder,
      onStored: (runId) => this.notifyCompletion(runId),
      tracing: opts.tracing,
      ...(opts.capture ? { capture: opts.capture } : {}),
    });
    const { maxConcurrent, maxQueued } = opts;
    this.admission = new Admission<ActiveRun>(
      { maxConcurrent, maxQueued },
      {
        start: (run) =>
          void this.execution.run(run).then(() => {
            this.admission.finished(run);
            // Its slot is free: a run queued in the database may take it.
            void this.claimWork();
          }),
        claim: (run) => this.claimSession(run),
        left: (run) => run.markFinished(),
        failed: (sessionId, err) =>
          opts.logger.error("could not start a run waiting for its session", {
            session_id: sessionId,
            error: errorText(err),
          }),
      },
    );
    this.claims = new ClaimLedger({
      db: opts.db,
      logger: opts.logger,
      instanceId: opts.instanceId,
      rings: opts.doorbell.rings,
    });
    this.claimer = new Claimer({ logger: opts.logger, claimOne: () => this.claimQueued() });
    opts.metrics.watchRuns(() => ({ ...this.admission.counts(), subscribers: this.subscribers }));
  }

  /** Called after each run's completion is stored (the callback outbox listens). */
  onCompletion(listener: (runId: string) => void): () => void {
    this.completionListeners.add(listener);
    return () => this.completionListeners.delete(listener);
  }

  /** Creates and queues a run for the session; with an idempotency key, may return an earlier one. */
  submit(session: SessionRow, message: Message): Promise<{ run: RunRow; created: boolean }> {
    // Taken now, in the caller's request: the run's span is a child of the request's.
    const traceParent = context.active();
    // The unique index on active runs still guards against other processes.
    return this.admission.inAdmissionOrder(session.id, () =>
      this.admit(session, message, traceParent),
    );
  }

  /**
   * Claims queued runs that no instance owns while this one has free slots (src/cluster/claims.ts);
   * nothing on the embedded database, where every run is this process's. Resolves when this look
   * is done (it never rejects: a failed claim is logged, and the next ring looks again).
   */
  claimWork(): Promise<void> {
    return this.opts.doorbell.shared ? this.claimer.check() : Promise.resolve();
  }

  /**
   * The server was told to stop: from now on no message is admitted and no queued run is claimed,
   * while the steps of its stop before `shutdown` go on (a run claimed then would have started on
   * an instance about to go, and held its stop for the run's length).
   */
  stopTaking(): void {
    this.admission.stopAccepting();
  }

  /** True while a run of the session is waiting, queued or running in this process. */
  isActive(sessionId: string): boolean {
    return this.admission.isActive(sessionId);
  }

  /**
   * Calls `task` in the session's admission order when the session has no active run (else
   * resolves undefined without calling it): a message arriving meanwhile waits for `task` and
   * sees what it did. The sweep expires sessions through this.
   */
  whenIdle<T>(sessionId: string, task: () => Promise<T>): Promise<T | undefined> {
    return this.admission.inAdmissionOrder(sessionId, async () => {
      if (this.isActive(sessionId) || (await getActiveRun(this.opts.db, sessionId))) {
        return undefined;
      }
      return task();
    });
  }

  /**
   * Deletes a session in its admission order: no message is admitted meanwhile or after, its
   * waiting and active runs are cancelled (their CLIs gone) before `remove` deletes what is left,
   * so that no run outlives the rows it writes to, nor makes a worktree again after `remove`.
   * Runs other instances execute are cancelled there, and their completions waited for.
   */
  deleteSession<T>(sessionId: string, remove: () => Promise<T>): Promise<T> {
    return this.admission.whileDeleting(sessionId, async () => {
      for (const run of this.admission.waitingFor(sessionId)) await this.cancel(run.id);
      for (const run of this.admission.runsOf(sessionId)) {
        // A run whose outcome is already known refuses the cancel: wait for its end all the same.
        await this.cancel(run.id).catch(() => {});
        await run.finished;
      }
      for (const row of await openRunsOf(this.opts.db, sessionId)) {
        // Ended meanwhile, or this instance's (a refusal of the cancel): nothing to wait for.
        await this.cancel(row.id).catch(() => {});
      }
      return await remove();
    });
  }

  /**
   * The run's events after position `after` of the view, then live ones until its completion, in
   * batches of consecutive events. A run of this process is followed in memory; any other (of
   * another instance, or finished) from the stored log, woken by the doorbell.
   */
  async *events(
    runId: string,
    view: LogView,
    after: number,
    signal?: AbortSignal,
  ): AsyncGenerator<SequencedEvent[]> {
    this.subscribers++;
    let position = after;
    // Set once this instance handed the run over: its log in memory says no more.
    let handedOver = false;
    try {
      for (;;) {
        // Registered before looking: a claim by this instance, from now on, switches to memory.
        const claimed = new AbortController();
        const followers = this.followersOf.get(runId) ?? new Set();
        this.followersOf.set(runId, followers.add(claimed));
        try {
          const live = handedOver
            ? undefined
            : (this.admission.get(runId)?.log ?? this.execution.unrecordedLog(runId));
          if (live) {
            for await (const batch of live.subscribe(view, position, signal)) {
              yield batch;
              const last = batch.at(-1);
              if (last) position = positionIn(view, last);
            }
            if (!live.handedOver || signal?.aborted) return;
            handedOver = true;
            continue;
          }
          const either = signal ? AbortSignal.any([signal, claimed.signal]) : claimed.signal;
          const { db, doorbell } = this.opts;
          for await (const batch of followElsewhere(db, doorbell, runId, view, position, either)) {
            yield batch;
            const last = batch.at(-1);
            if (last) position = positionIn(view, last);
          }
        } finally {
          followers.delete(claimed);
          if (followers.size === 0) this.followersOf.delete(runId);
        }
        if (!claimed.signal.aborted || signal?.aborted) return;
        // This instance claimed it: its log is in memory again.
        handedOver = false;
      }
    } finally {
      this.subscribers--;
    }
  }

  /**
   * Tries at once to store the run's completion, when this instance holds it unstored (the
   * database was down at the run's end), so that a client reading the run finds it finished;
   * resolves with whether it held one.
   */
  storeWaitingCompletion(runId: string): Promise<boolean> {
    return this.recorder.storeNow(runId);
  }

  /**
   * Stops a queued or running run; it ends `cancelled` with its completion event. A running run's
   * CLI is asked to end its turn first, so that what it spent is counted, and its process group is
   * killed when it has not within CANCEL_GRACE_MS. A run another instance executes is cancelled
   * by that one (src/cluster/commands.ts); this resolves once its completion is stored.
   */
  cancel(runId: string): Promise<void> {
    return this.stop(runId, "cancel", (run) => this.endTurn(run, CANCEL_GRACE_MS));
  }

  /**
   * Asks a running run's CLI to end its turn (its usage counted, its conversation intact for the
   * next message), and stops it as a cancel does when it has not ended within the kill grace; a
   * run not started yet is cancelled. Either way it ends `cancelled`.
   */
  interrupt(runId: string): Promise<void> {
    return this.stop(runId, "interrupt", (run) => this.endTurn(run, this.opts.killGraceMs));
  }

  /**
   * Asks the run's CLI to end its turn and stops it when it has not within `graceMs`; one whose
   * back-end cannot be asked is stopped at once. What waits for an answer is refused first, so
   * that no later answer reaches the CLI, within the same grace (its row is written first).
   */
  private async endTurn(run: ActiveRun, graceMs: number): Promise<void> {
    // A back-end this instance does not run (a claimed run it is about to refuse) cannot be asked.
    const interruptible = this.opts.agents.all.some(
      (backend) => backend.name === run.session.agent && backend.interruptible,
    );
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<"late">((resolve) => {
      timer = setTimeout(() => resolve("late"), graceMs);
    });
    const asked = this.approvals.stopping(run).then(async () => {
      if (!interruptible) return "late" as const;
      run.interruption.abort();
      await run.finished;
      return "ended" as const;
    });
    const ended = await Promise.race([asked, late]);
    clearTimeout(timer);
    if (ended === "late") run.abort.abort();
    await run.finished;
  }

  /**
   * Ends a run by a client's request: `running` is how a running one is stopped; one another
   * instance executes gets the command `kind` there.
   */
  private async stop(
    runId: string,
    kind: "cancel" | "interrupt",
    running: (run: ActiveRun) => Promise<void>,
    again = true,
  ): Promise<void> {
    const run = this.admission.get(runId);
    if (!run) {
      const { db, doorbell, instanceId } = this.opts;
      // Ended here, its completion not stored yet: stored first, so that it is answered finished.
      await this.recorder.storeNow(runId);
      const row = await getRun(db, runId);
      const mine = row?.status === "queued" && row.instanceId === instanceId();
      const failedToken = mine && this.claims.hasFailed(row.claimToken) ? row.claimToken : null;
      if (
        row?.status === "queued" &&
        ((row.instanceId === null && row.handover !== null) || failedToken !== null)
      ) {
        // Queued for any instance, or this one's by a claim that failed: claimed (taken from
        // that claim, before the claimer gives it back) to end it, never started. Ended within
        // the claim, which shutdown waits for (ending never rejects: a completion the database
        // would not take waits in the recorder).
        const ended = await this.claims.claim(async (claim) => {
          const claimed = await claimRun(db, runId, claim, failedToken);
          if (!claimed) return false;
          const unstarted = await this.activeRunOf(claimed);
          await this.execution.endUnstarted(unstarted, "cancelled", "cancelled before it started");
          return true;
        });
        if (!ended) return this.cancel(runId);
        return;
      }
      if (again && mine && doorbell.shared) {
        // Claimed here by a claim in progress, which starts the run or gives it back.
        await this.claims.settled();
        return this.stop(runId, kind, running, false);
      }
      const owner = row?.instanceId;
      if (row && owner && owner !== instanceId() && OPEN_STATUSES.includes(row.status)) {
        const status = await stopElsewhere(db, doorbell, { ...row, instanceId: owner }, kind);
        if (status === "cancelled") return;
        throw new RunFinishedError(runId, status ?? "unknown");
      }
      throw new RunFinishedError(runId, row?.status ?? "unknown");
    }
    // Its outcome is known, its completion on the way: too late to cancel. Answered once the run
    // is over, so that the client then reads it finished.
    if (run.outcome) {
      const { outcome } = run;
      await run.finished;
      throw new RunFinishedError(runId, outcome);
    }
    const place = this.admission.withdraw(run);
    if (place === "running") {
      run.cancelled = true;
      await running(run);
      return;
    }
    await this.endUnstarted(
      run,
      "cancelled",
      place === "waiting"
        ? "cancelled while it waited for its session"
        : "cancelled before it started",
    );
  }

  /** Carries out a command another instance posted for a run of this one. */
  apply(command: RunCommand): void {
    const done =
      command.kind === "answer"
        ? this.approvals.answered(command.runId, command.requestId)
        : command.kind === "interrupt"
          ? this.interrupt(command.runId)
          : this.cancel(command.runId);
    done.catch((err) =>
      this.opts.logger.info(
        `a${command.kind === "answer" ? "n" : ""} ${command.kind} from another instance found the run ending already`,
        {
          run_id: command.runId,
          error: errorText(err),
        },
      ),
    );
  }

  /**
   * Records a client's answer to a permission request of the run, with the API key that gave it,
   * and gives it to the CLI: here, or, for a run another instance executes, there (a command, as
   * for a cancel).
   */
  async answerPermission(run: RunRow, requestId: string, reply: ClientReply, keyId: string | null) {
    const { db, doorbell, instanceId } = this.opts;
    const { row, delivered } = await this.approvals.answer(run, requestId, reply, keyId);
    const owner = run.instanceId;
    if (!delivered && owner && owner !== instanceId()) {
      await postRunCommand(db, { runId: run.id, kind: "answer", requestId, owner }, doorbell.rings);
    }
    return row;
  }

  /**
   * Closes the runs a dead instance left (null: those of versions before instances): their
   * process groups are killed where they can still be theirs, and each gets an `interrupted`
   * completion, which frees its session.
   */
  reap(instance: DeadInstance | null): Promise<number> {
    const { db, logger, killGraceMs, transactionHooks } = this.opts;
    return reapRuns(
      { db, logger, killGraceMs, recorder: this.recorder, hooks: transactionHooks },
      instance,
    );
  }

  /**
   * Ends the queued runs pinned to a host where no instance is alive any more (the last one
   * stopped or died after they were written): `interrupted`, as the runs of an instance that is
   * gone. Asked at each lease renewal.
   */
  async closeStranded(): Promise<void> {
    const { db, logger } = this.opts;
    if (!this.opts.doorbell.shared || this.claims.closed) return;
    // Ended within the claim, as a cancel's claimed run is.
    await this.claims.claim(async (claim) => {
      const rows = await claimStrandedRuns(db, claim);
      const stranded = await Promise.all(
        rows.map((row) => this.activeRunOf({ run: row, resume: false })),
      );
      for (const run of stranded) {
        const { row } = run;
        await this.execution.endUnstarted(
          run,
          "interrupted",
          `no instance of host ${row.pinnedHost}, which holds the session's worktree, is alive to run it`,
        );
        logger.warn("closed a queued run whose worktree's host is gone", {
          run_id: row.id,
          host: row.pinnedHost,
        });
      }
    });
  }

  /**
   * This instance lost its lease: another one has closed its runs. Their CLIs are stopped; what
   * they write no longer reaches the runs' logs, which took their one completion already.
   */
  abandonAll(): void {
    for (const run of this.admission.all()) {
      if (run.outcome) continue;
      run.interrupt("this instance lost its lease; another instance closed the run");
    }
  }

  /**
   * Stops taking and claiming runs, hands its queued runs back for other instances to claim (on
   * the embedded database, and those waiting for their session, they end `interrupted`), lets
   * running ones finish for up to `graceMs` (or until `hurry` is aborted), then stops them; every
   * run it keeps gets its completion before this resolves.
   */
  async shutdown(graceMs: number, hurry?: AbortSignal): Promise<void> {
    const unstarted = "the server shut down before the run started";
    const { queued, waiting } = this.admission.close();
    for (const run of queued) {
      if (await this.handOver(run)) this.admission.remove(run);
      else await this.endUnstarted(run, "interrupted", unstarted);
    }
    for (const run of waiting) await this.endUnstarted(run, "interrupted", unstarted);
    const all = () => Promise.all(this.admission.all().map((r) => r.finished));
    let timer: NodeJS.Timeout | undefined;
    const graceOver = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, graceMs);
      // Told to hurry already (while the queued runs were handed back), or later.
      if (hurry?.aborted) resolve();
      else hurry?.addEventListener("abort", () => resolve(), { once: true });
    });
    await Promise.race([all(), graceOver]);
    clearTimeout(timer);
    for (const run of this.admission.all()) {
      // One whose outcome is known is finishing: it ends as it did.
      if (run.outcome) continue;
      run.interrupt("the server shut down before the run finished");
    }
    await all();
    // No claim starts from here on; one in progress gives its run back (the admission is
    // closed), ends it (a cancel's), or fails, and is then given back below.
    await this.claims.close();
    // A completion the database would not take yet gets one more try.
    await this.recorder.flush();
    // Before the instance records its end: still owned by an instance that ended, a run would
    // never be claimed nor reaped. Failing, the instance leaves its lease to expire instead, and
    // another instance (or the next start) closes what it left.
    await withDbRetries(() => this.claims.giveBackFailed(), this.opts.dbOutageBoundMs);
    // Given up on too: an instance that recorded its end would never have them reaped.
    const unstored = this.recorder.unstored();
    if (unstored.length > 0) throw new CompletionsUnstoredError(unstored);
  }

  /** How many runs run here now (what a shutdown lets finish). */
  get running(): number {
    return this.admission.counts().running;
  }

  /**
   * The runs this instance holds whose completion is not stored: waiting, queued or running here,
   * or ended with a completion the database has not taken. What a shutdown that cannot finish
   * leaves to recovery.
   */
  unsettled(): string[] {
    return [
      ...new Set([...this.admission.all().map((r) => r.row.id), ...this.recorder.unstored()]),
    ];
  }

  private async admit(
    session: SessionRow,
    message: Message,
    traceParent: Context,
  ): Promise<{ run: RunRow; created: boolean }> {
    try {
      return await this.admitNew(session, message, traceParent);
    } catch (err) {
      const key = message.idempotencyKey;
      // Another try of the same request, on this instance or another, made its run between this
      // one's look for it and its own insert (the session busy, or the key taken): answer that run.
      const raced =
        err instanceof SessionBusyError || uniqueViolation(err) === "runs_session_idempotency_key";
      if (!key || !raced) throw err;
      const earlier = await findIdempotentRun(this.opts.db, session.id, key, messageHash(message));
      if (!earlier) throw err;
      return { run: earlier, created: false };
    }
  }

  private async admitNew(
    session: SessionRow,
    message: Message,
    traceParent: Context,
  ): Promise<{ run: RunRow; created: boolean }> {
    const { db, agents, gate, transactionHooks } = this.opts;
    this.admission.checkOpen(session.id);
    // Read again rather than trusting `session`: the sweep may have expired it since.
    const state = await admissionState(db, session.id);
    if (!state) throw new SessionGoneError(session.id);
    if (state.expired) throw new SessionExpiredError(session.id);
    const requestHash = message.idempotencyKey ? messageHash(message) : null;
    if (message.idempotencyKey) {
      const earlier = await findIdempotentRun(db, session.id, message.idempotencyKey, requestHash);
      if (earlier) return { run: earlier, created: false };
    }
    const resumeAt = message.retryOf ? await this.retryPoint(session.id, message.retryOf) : null;
    const mayWait = Boolean(message.waitForSession);
    let wait = this.admission.mustWait(session.id, state.activeRunId, mayWait);
    agents.get(session.agent);
    const options = message.options ?? NO_RUN_OPTIONS;
    await gate.allow(session, runSettings(sessionSettings(session), options));
    const pinnedHost = await this.pinnedHost(session);
    // Here when it can start here at once (or must wait in this instance's line for its session);
    // else queued in the database for any instance (of its host, when pinned) to claim.
    const here =
      !this.opts.doorbell.shared ||
      ((pinnedHost === null || pinnedHost === this.opts.host) &&
        (wait || this.admission.hasFreeSlot()));
    if (here) this.admission.checkRoom();
    const hooks = transactionHooks.filter((hook) => hook.joins(message));
    const keyId = session.ownerKeyId;
    const limit = keyId
      ? {
          keyId,
          max: this.opts.maxPerKey,
          retryAfterSeconds: () => this.admission.retryAfterSeconds(),
        }
      : null;
    const insert = (status: "queued" | "waiting") => {
      // A run that waits for its session waits in this instance's line.
      const unowned = !here && status === "queued";
      return recordRun(
        db,
        {
          sessionId: session.id,
          instanceId: unowned ? null : this.opts.instanceId(),
          agent: session.agent,
          status,
          trigger: message.trigger,
          prompt: message.text,
          systemPrompt: message.systemPrompt,
          idempotencyKey: message.idempotencyKey,
          requestHash,
          handover: unowned ? toHandover({ options, resumeAt }) : null,
          pinnedHost,
        },
        message,
        hooks,
        limit,
        unowned
          ? {
              perInstance: this.opts.maxQueued,
              ring: this.opts.doorbell.rings,
              retryAfterSeconds: () => this.admission.retryAfterSeconds(),
            }
          : null,
      );
    };
    const freePlace = this.admission.holdPlace();
    let row: RunRow;
    try {
      try {
        row = await insert(wait ? "waiting" : "queued");
      } catch (err) {
        // Another process (or a run admitted meanwhile) took the session: wait behind it.
        if (!mayWait || uniqueViolation(err) !== "runs_one_active_per_session") throw err;
        wait = true;
        row = await insert("waiting");
      }
    } catch (err) {
      const constraint = uniqueViolation(err);
      if (constraint === "runs_one_active_per_session") {
        const activeRun = await getActiveRun(db, session.id);
        throw new SessionBusyError(activeRun?.id ?? "unknown");
      }
      throw err;
    } finally {
      freePlace();
    }
    // Claimed by whichever instance has a slot first; its poster follows it from the log.
    if (row.instanceId === null) return { run: row, created: true };
    // `resume` is asked again when a waiting run takes its turn.
    const log = new RunLog(this.writer, row.id, db);
    const run = new ActiveRun(row, session, log, state.resume, hooks, options, resumeAt);
    run.traceParent = traceParent;
    this.admission.add(run, wait);
    return { run: row, created: true };
  }

  /**
   * The host a worktree session's runs must run on (null: any): the one whose disk holds its
   * worktree. A WorktreeHostGoneError when no instance of that host is alive to run it.
   */
  private async pinnedHost(session: SessionRow): Promise<string | null> {
    const { db, host } = this.opts;
    if (!session.worktree) return null;
    const pinned = (await getSessionWorktree(db, session.id))?.host ?? null;
    if (pinned === null || pinned === host || !this.opts.doorbell.shared) return pinned;
    if ((await countLiveInstances(db, pinned)) === 0) {
      throw new WorktreeHostGoneError(session.id, pinned);
    }
    return pinned;
  }

  /**
   * Claims the queued run no instance owns whose turn it is, of those this host may run
   * (claimQueuedRun), when a slot is free here, and starts it; false when there is no slot or no
   * such run.
   */
  private async claimQueued(): Promise<boolean> {
    await this.claims.giveBackFailed();
    if (!this.admission.hasFreeSlot()) return false;
    const { db, host } = this.opts;
    const freePlace = this.admission.holdPlace();
    try {
      return await this.claims.claim(async (claim) => {
        const claimed = await claimQueuedRun(db, claim, host);
        if (!claimed) return false;
        // Through an outage, as a run's writes are: a claimed run left neither started nor given
        // back would stay this instance's, queued, until the next claim gives it back.
        const retrying = <T>(task: () => Promise<T>) =>
          withDbRetries(task, this.opts.dbOutageBoundMs);
        const giveBack = () => retrying(() => this.claims.giveBack([claim.token]));
        let run: ActiveRun;
        try {
          run = await retrying(() => this.activeRunOf(claimed));
        } catch (err) {
          // Not startable here now: back to the queue, for this or another instance.
          await giveBack();
          throw err;
        }
        // Told to stop while it was claiming: the run is another instance's to take.
        if (!this.admission.open) {
          await giveBack();
          return false;
        }
        this.admission.add(run, false);
        for (const follower of this.followersOf.get(run.id) ?? []) follower.abort();
        return true;
      });
    } finally {
      freePlace();
    }
  }

  /** A run this instance claimed, from its rows, as its admission would have made it. */
  private async activeRunOf(claimed: { run: RunRow; resume: boolean }): Promise<ActiveRun> {
    const { db, transactionHooks } = this.opts;
    const { run: row, resume } = claimed;
    const session = await getSession(db, row.sessionId, ANONYMOUS_ADMIN);
    // The run's row is deleted with its session: a claimed run always has one.
    if (!session) throw new SessionGoneError(row.sessionId);
    const { options, resumeAt } = row.handover
      ? fromHandover(row.handover)
      : { options: NO_RUN_OPTIONS, resumeAt: null };
    const log = new RunLog(this.writer, row.id, db);
    // Which hooks joined it is not known here: each hook's part keys on the run (as in recovery).
    return new ActiveRun(row, session, log, resume, transactionHooks, options, resumeAt);
  }

  /**
   * Gives a queued run back to the database's queue for another instance to claim, with what its
   * message set for it; false on the embedded database, or when that failed.
   */
  private async handOver(run: ActiveRun): Promise<boolean> {
    const { db, doorbell, instanceId, logger } = this.opts;
    if (!doorbell.shared) return false;
    try {
      const handover = toHandover({ options: run.options, resumeAt: run.resumeAt });
      if (!(await releaseRun(db, run.id, instanceId(), handover))) return false;
      run.log.handOver();
      if (doorbell.rings) await ringForWork(db, run.row.pinnedHost);
      logger.info("handed a queued run over to the other instances", { run_id: run.id });
      return true;
    } catch (err) {
      logger.error("could not hand a queued run over", { run_id: run.id, error: errorText(err) });
      return false;
    }
  }

  /**
   * Where a retry of `runId` resumes the conversation, once it is known to be the session's
   * newest run and finished (asked in the session's admission order, so no message slips in).
   */
  private async retryPoint(sessionId: string, runId: string): Promise<string | null> {
    const { latest, resumeAt } = await retryPoint(this.opts.db, sessionId, runId);
    if (!latest) throw new SessionGoneError(sessionId);
    if (latest.id !== runId) throw new RunNotLatestError(runId, latest.id);
    if (["queued", "running", "waiting"].includes(latest.status)) {
      throw new SessionBusyError(latest.id);
    }
    return resumeAt;
  }

  /**
   * A waiting run's turn: it becomes the session's queued run in the store, if no other is. On
   * Postgres it joins the database's queue (`gone` from here) when it cannot start here at once:
   * pinned to another host, or no slot free here (queued in this instance's memory, it would go
   * before the database's queue, out of its turn).
   */
  private async claimSession(run: ActiveRun): Promise<"claimed" | "blocked" | "gone"> {
    let promoted: Awaited<ReturnType<typeof promoteWaitingRun>>;
    try {
      promoted = await promoteWaitingRun(this.opts.db, run.id);
    } catch (err) {
      // Another process still has a run on the session: keep waiting (the poll looks again).
      if (uniqueViolation(err) === "runs_one_active_per_session") return "blocked";
      throw err;
    }
    // The row is gone (its session was deleted): nothing to run.
    if (!promoted) return "gone";
    run.row = promoted.run;
    run.resume = promoted.resume;
    // Its session's worktree is on another host's disk: that host's instances run it.
    const { pinnedHost } = promoted.run;
    const elsewhere = pinnedHost !== null && pinnedHost !== this.opts.host;
    const queued = this.opts.doorbell.shared && !this.admission.hasFreeSlot();
    if ((elsewhere || queued) && (await this.handOver(run))) {
      // A claim in progress here may have looked before it was queued: it looks again after.
      if (!elsewhere) void this.claimWork();
      return "gone";
    }
    return "claimed";
  }

  private async endUnstarted(run: ActiveRun, status: "cancelled" | "interrupted", reason: string) {
    await this.execution.endUnstarted(run, status, reason);
    this.admission.remove(run);
  }

  private notifyCompletion(runId: string) {
    for (const listener of this.completionListeners) {
      try {
        listener(runId);
      } catch (err) {
        this.opts.logger.error("a completion listener failed", {
          run_id: runId,
          error: errorText(err),
        });
      }
    }
  }
}
