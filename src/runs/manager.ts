import { errorText, type Logger } from "../log.js";
import type { RunCommand } from "../store/commands.js";
import type { EventBatch, LogView, SequencedEvent } from "../store/events.js";
import type { PermissionRequestRow, RunRow, SessionRow } from "../store/schema.js";
import type { ActiveRun } from "./active-run.js";
import { Admission } from "./admission.js";
import { Approvals, type ClientReply } from "./approvals.js";
import type { DeadInstance } from "./cluster-port.js";
import { Execution } from "./execution.js";
import { Following } from "./follow.js";
import { LogWriter } from "./log-writer.js";
import type { Message } from "./message.js";
import type { RunManagerOptions, RunParts } from "./parts.js";
import { RunQueue } from "./queue.js";
import { CompletionRecorder, type RunTransactionHook } from "./recording.js";
import { RunLog } from "./run-log.js";
import { Shutdown } from "./shutdown.js";
import {
  type ClientControl,
  type ClientInput,
  type ControlEvent,
  Steering,
  type UserInputEvent,
} from "./steer.js";
import { Stopping } from "./stop.js";
import { type AdmissionRead, Submission } from "./submit.js";

/**
 * Told of each batch of a run's events stored here, with the transaction hooks that joined the
 * run: every hook for a run claimed from the database's queue (which joined it is not known
 * there); undefined for a run not admitted here.
 */
export type EventListener = (
  batch: EventBatch,
  joined: readonly RunTransactionHook[] | undefined,
) => void;

/** Told of each run's completion once it is stored, with its hooks as an EventListener is. */
export type CompletionListener = (
  runId: string,
  joined: readonly RunTransactionHook[] | undefined,
) => void;

/**
 * What the routes, the hooks and the server use of runs. It builds the parts and hands each call
 * to the one whose job it is: a message is admitted (submit.ts) and runs in its turn
 * (execution.ts); runs are stopped (stop.ts), followed (follow.ts), taken from and given back to
 * the database's queue (queue.ts), and ended with the instance (shutdown.ts). A run's state is
 * its own (run-state.ts).
 */
export class RunManager {
  private readonly admission: Admission<ActiveRun>;
  private readonly submission: Submission;
  private readonly queue: RunQueue;
  private readonly following: Following;
  private readonly stopping: Stopping;
  private readonly steering: Steering;
  private readonly ending: Shutdown;
  private readonly recorder: CompletionRecorder;
  private readonly completionListeners = new Set<CompletionListener>();
  private readonly eventListeners = new Set<EventListener>();
  private readonly logger: Logger;

  constructor(opts: RunManagerOptions) {
    const { db, logger, cluster } = opts;
    const writer = new LogWriter(opts.eventsDb, logger, opts.dbOutageBoundMs, {
      metrics: opts.metrics,
      ring: cluster.rings,
      onStored: (batch) => {
        const joined = this.admission.get(batch.runId)?.hooks;
        this.notify(this.eventListeners, [batch, joined], batch.runId, "an event listener");
      },
    });
    const recorder = new CompletionRecorder({
      db,
      logger,
      outageBoundMs: opts.dbOutageBoundMs,
      ring: cluster.rings,
      onSettled: (runId, stored) => execution.settled(runId, stored),
    });
    const approvals = new Approvals({
      db,
      logger,
      timeoutSeconds: opts.approvalTimeoutSeconds,
      ...(opts.clock ? { clock: opts.clock } : {}),
    });
    const execution = new Execution({
      approvals,
      db,
      logger,
      agents: opts.agents,
      gate: opts.gate,
      homes: opts.homes,
      git: opts.git,
      checkouts: opts.checkouts,
      workDir: opts.workDir,
      host: opts.host,
      metrics: opts.metrics,
      recorder,
      onStored: (runId) => this.notifyCompletion(runId),
      tracing: opts.tracing,
      ...(opts.capture ? { capture: opts.capture } : {}),
    });
    const { maxConcurrent, maxQueued } = opts;
    const admission = new Admission<ActiveRun>(
      { maxConcurrent, maxQueued },
      {
        start: (run) =>
          void execution.run(run).then(() => {
            admission.finished(run);
            // Its slot is free: a run queued in the database may take it.
            void this.queue.pull();
          }),
        promote: (run) => this.queue.promote(run),
        left: (run) => run.life.fire({ type: "leave" }),
        failed: (sessionId, err) =>
          logger.error("could not start a run waiting for its session", {
            session_id: sessionId,
            error: errorText(err),
          }),
      },
    );
    const parts: RunParts = {
      opts,
      admission,
      execution,
      recorder,
      approvals,
      logFor: (runId) => new RunLog(writer, runId, db),
    };
    this.logger = logger;
    this.admission = admission;
    this.recorder = recorder;
    this.following = new Following(parts);
    this.queue = new RunQueue(parts, (runId) => this.following.adopted(runId));
    this.submission = new Submission(parts);
    this.stopping = new Stopping(parts, this.queue);
    this.steering = new Steering(parts);
    this.ending = new Shutdown(parts, this.queue);
    opts.metrics.watchRuns(() => ({
      ...admission.counts(),
      subscribers: this.following.subscribers,
    }));
  }

  /** Called after each run's completion is stored (the callback outbox listens). */
  onCompletion(listener: CompletionListener): () => void {
    this.completionListeners.add(listener);
    return () => this.completionListeners.delete(listener);
  }

  /**
   * Creates and queues a run for the session; with an idempotency key, may return an earlier one.
   * `read`: the caller's read of the session's admission state (admissionState, begun after
   * readMark), which spares the admission its own when nothing was admitted here since.
   */
  submit(
    session: SessionRow,
    message: Message,
    read?: AdmissionRead,
  ): Promise<{ run: RunRow; created: boolean }> {
    return this.submission.submit(session, message, read);
  }

  /** The mark to take as a read of the session for `submit` starts. */
  readMark(sessionId: string): number | undefined {
    return this.admission.readMark(sessionId);
  }

  /**
   * Rung for work: queued runs no instance owns are taken while slots are free here (see
   * RunQueue.pull), and the sessions' lines here look again whether their session is free.
   */
  pullWork(): Promise<void> {
    this.admission.lookAgain();
    return this.queue.pull();
  }

  /**
   * The server was told to stop: from now on no message is admitted and no queued run is pulled,
   * while the steps of its stop before `shutdown` go on (a run pulled then would have started on
   * an instance about to go, and held its stop for the run's length).
   */
  stopTaking(): void {
    this.admission.stopAccepting();
  }

  /** True while a run of the session is waiting, queued or running in this process. */
  isActive(sessionId: string): boolean {
    return this.admission.isActive(sessionId);
  }

  /** See Submission.whenIdle (the sweep expires sessions through it). */
  whenIdle<T>(sessionId: string, task: () => Promise<T>): Promise<T | undefined> {
    return this.submission.whenIdle(sessionId, task);
  }

  /** See Stopping.deleteSession. */
  deleteSession<T>(sessionId: string, remove: () => Promise<T>): Promise<T> {
    return this.stopping.deleteSession(sessionId, remove);
  }

  /** See Following.events. */
  events(
    runId: string,
    view: LogView,
    after: number,
    signal?: AbortSignal,
  ): AsyncGenerator<SequencedEvent[]> {
    return this.following.events(runId, view, after, signal);
  }

  /**
   * Tries at once to store the run's completion, when this instance holds it unstored (the
   * database was down at the run's end), so that a client reading the run finds it finished;
   * resolves with whether it held one.
   */
  storeWaitingCompletion(runId: string): Promise<boolean> {
    return this.recorder.storeNow(runId);
  }

  /** See Stopping.cancel. */
  cancel(runId: string): Promise<void> {
    return this.stopping.cancel(runId);
  }

  /** See Stopping.interrupt. */
  interrupt(runId: string): Promise<void> {
    return this.stopping.interrupt(runId);
  }

  /** Carries out a command another instance posted for a run of this one. */
  apply(command: RunCommand): void {
    if (command.kind === "input" || command.kind === "control") this.steering.apply(command);
    else this.stopping.apply(command);
  }

  /** See Steering.input. */
  input(run: RunRow, agent: string, input: ClientInput): Promise<UserInputEvent> {
    return this.steering.input(run, agent, input);
  }

  /** See Steering.control. */
  control(run: RunRow, agent: string, change: ClientControl): Promise<ControlEvent> {
    return this.steering.control(run, agent, change);
  }

  /** See Stopping.answerPermission. */
  answerPermission(
    run: RunRow,
    requestId: string,
    reply: ClientReply,
    keyId: string | null,
  ): Promise<PermissionRequestRow> {
    return this.stopping.answerPermission(run, requestId, reply, keyId);
  }

  /** See Shutdown.reap. */
  reap(instance: DeadInstance | null): Promise<number> {
    return this.ending.reap(instance);
  }

  /** See RunQueue.closeStranded. */
  closeStranded(): Promise<void> {
    return this.queue.closeStranded();
  }

  /** See Shutdown.abandonAll. */
  abandonAll(): void {
    this.ending.abandonAll();
  }

  /** See Shutdown.shutdown. */
  shutdown(graceMs: number, hurry?: AbortSignal): Promise<void> {
    return this.ending.shutdown(graceMs, hurry);
  }

  /** Called after each batch of a run's events (not its completion) is stored here. */
  onEvents(listener: EventListener): () => void {
    this.eventListeners.add(listener);
    return () => this.eventListeners.delete(listener);
  }

  get running(): number {
    return this.admission.counts().running;
  }

  /** See Shutdown.unsettled. */
  unsettled(): string[] {
    return this.ending.unsettled();
  }

  private notifyCompletion(runId: string) {
    const joined = this.admission.get(runId)?.hooks;
    this.notify(this.completionListeners, [runId, joined], runId, "a completion listener");
  }

  private notify<T extends unknown[]>(
    listeners: Set<(...args: T) => void>,
    args: T,
    runId: string,
    what: string,
  ) {
    for (const listener of listeners) {
      try {
        listener(...args);
      } catch (err) {
        this.logger.error(`${what} failed`, { run_id: runId, error: errorText(err) });
      }
    }
  }
}
