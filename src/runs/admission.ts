import { QueueFullError, SessionBusyError, SessionGoneError, ShuttingDownError } from "./errors.js";

// Which runs of this process may start, and when: the run slots and the queue behind them, each
// session's line of runs waiting for it, and the order in which one session's messages are
// admitted. Memory only: the store's part (reading a session, writing its run, promoting a waiting
// run, the per-key limit that every instance counts) is the caller's.
//
// A freed slot goes to the key with the fewest runs running (ties: the key whose run has waited
// longest), to its run queued first, so that one key's backlog never holds every slot while
// another key's run waits. A session has at most one run queued or running (the rest wait in its
// line), so this never reorders one session's runs. The queue pulled from the database orders by
// the same rule over every instance (claimQueuedRun, src/store/run-claims.ts).

/** What admission needs to know of a run. */
export interface Admittable {
  readonly id: string;
  readonly sessionId: string;
  /** The API key whose session it is; null without keys (such runs share one key's turn). */
  readonly keyId: string | null;
}

export interface AdmissionLimits {
  /** Runs running at once. */
  maxConcurrent: number;
  /** Runs queued or waiting for their session, beyond the running ones. */
  maxQueued: number;
}

/** What the owner of the runs does when admission moves one. */
export interface AdmissionHandlers<R> {
  /** The run has a slot: run it, and call `finished` once it is over. Never throws. */
  start(run: R): void;
  /**
   * The session is free here and the run is first in its line: promote it to the session's
   * queued run in the store. `blocked`: another process still has a run on it, or a run of it
   * written earlier waits on another instance (looked at again later); `gone`: the
   * run is not this process's to run (it no longer exists, or another host's instances run it).
   */
  promote(run: R): Promise<"promoted" | "blocked" | "gone">;
  /** The run has left admission: it ran, was withdrawn and ended, or is gone. */
  left(run: R): void;
  /** Taking a waiting run's turn failed. */
  failed(sessionId: string, err: unknown): void;
}

/** How often the lines look for sessions freed by another process, whose runs' ends none sees here. */
const LINE_POLL_MS = 1000;

/** A rough wait: each run ahead in the queue is assumed to take this long of one slot. */
const SECONDS_PER_QUEUED_RUN = 30;

export class Admission<R extends Admittable> {
  /** Every run admitted that has not left: waiting, queued or running. */
  private readonly admitted = new Map<string, R>();
  private readonly queue: R[] = [];
  /**
   * Runs waiting for their session to be free, per session, oldest first: the one record of which
   * admitted runs wait (the rest are queued or running).
   */
  private readonly lines = new Map<string, R[]>();
  private linePoll: NodeJS.Timeout | undefined;
  private running = 0;
  /** Runs running per key (null: runs without one). */
  private readonly runningPerKey = new Map<string | null, number>();
  /** Places held by runs being written (see holdPlace). */
  private placing = 0;
  private readonly orders = new Map<string, Promise<void>>();
  /** Tasks asked for in admission order so far, on any session (see readMark). */
  private asked = 0;
  private accepting = true;
  /** Sessions being deleted: no message is admitted to them any more. */
  private readonly deleting = new Set<string>();

  constructor(
    private readonly limits: AdmissionLimits,
    private readonly handlers: AdmissionHandlers<R>,
  ) {}

  /**
   * Runs `task` after every task asked for earlier on the session (settled or not): messages to
   * one session are admitted one after the other, so that of several racing, one gets the run and
   * the rest see it (409) rather than competing for queue places (429).
   */
  inAdmissionOrder<T>(sessionId: string, task: () => Promise<T>): Promise<T> {
    this.asked++;
    const previous = this.orders.get(sessionId) ?? Promise.resolve();
    const admitted = previous.then(task);
    const settled = admitted.then(
      () => {},
      () => {},
    );
    this.orders.set(sessionId, settled);
    void settled.then(() => {
      if (this.orders.get(sessionId) === settled) this.orders.delete(sessionId);
    });
    return admitted;
  }

  /**
   * A mark to take as a read of the session for its admission starts; undefined while a task is
   * under way on the session, which may change what the read sees (see quietSince).
   */
  readMark(sessionId: string): number | undefined {
    return this.orders.has(sessionId) ? undefined : this.asked;
  }

  /**
   * Whether no task has been asked for in admission order since `mark`, on any session, and none
   * is under way on this one: a read of the session from then on is as good as one made now.
   */
  quietSince(sessionId: string, mark: number | undefined): boolean {
    return mark === this.asked && !this.orders.has(sessionId);
  }

  /** Runs `task` in the session's admission order; no run is admitted to the session meanwhile. */
  whileDeleting<T>(sessionId: string, task: () => Promise<T>): Promise<T> {
    return this.inAdmissionOrder(sessionId, async () => {
      this.deleting.add(sessionId);
      try {
        return await task();
      } finally {
        this.deleting.delete(sessionId);
      }
    });
  }

  /** Throws unless the session takes runs at all: not while shutting down or being deleted. */
  checkOpen(sessionId: string): void {
    if (!this.accepting) throw new ShuttingDownError();
    if (this.deleting.has(sessionId)) throw new SessionGoneError(sessionId);
  }

  /**
   * Whether a new run of the session must wait in its line: when a run is active on it
   * (`activeRunId`, as the store knows) or already waiting for it (`waitingRunId`, on any
   * instance, or here), since a newcomer may not overtake those. Unless it `mayWait`, that is a
   * SessionBusyError naming the run in the way.
   */
  mustWait(
    sessionId: string,
    activeRunId: string | null,
    mayWait: boolean,
    waitingRunId: string | null = null,
  ): boolean {
    const inLine = waitingRunId ?? this.lines.get(sessionId)?.[0]?.id ?? null;
    if (!mayWait) {
      if (activeRunId) throw new SessionBusyError(activeRunId);
      if (inLine) throw new SessionBusyError(inLine);
    }
    return Boolean(activeRunId || inLine);
  }

  /** Whether a run admitted now would start at once: a slot is free and nothing queued before it. */
  hasFreeSlot(): boolean {
    return (
      this.accepting &&
      this.queue.length === 0 &&
      this.running + this.placing < this.limits.maxConcurrent
    );
  }

  /** Throws when every slot and queue place is taken. */
  checkRoom(): void {
    const { maxConcurrent, maxQueued } = this.limits;
    const capacity = maxConcurrent + maxQueued;
    if (this.running + this.queue.length + this.waitingCount() + this.placing >= capacity) {
      throw new QueueFullError(capacity, this.retryAfterSeconds());
    }
  }

  /**
   * Holds a place while a run is written, so that concurrent submits cannot overfill; the
   * function it returns frees it (call it once, whatever the write did).
   */
  holdPlace(): () => void {
    this.placing++;
    return () => {
      this.placing--;
    };
  }

  /** Takes in a written run: into its session's line when it must `wait`, else a slot or the queue. */
  add(run: R, wait: boolean): void {
    this.admitted.set(run.id, run);
    if (wait) this.enqueueWaiting(run);
    else this.place(run);
  }

  /** The run's slot is free: it leaves, the next queued run starts, and its session's line moves. */
  finished(run: R): void {
    this.running--;
    const left = (this.runningPerKey.get(run.keyId) ?? 1) - 1;
    if (left > 0) this.runningPerKey.set(run.keyId, left);
    else this.runningPerKey.delete(run.keyId);
    this.admitted.delete(run.id);
    this.handlers.left(run);
    const next = this.takeNext();
    if (next) this.start(next);
    this.release(run.sessionId);
  }

  /**
   * Takes a run that has not started out of its line or the queue, saying where it was; a running
   * one stays. Until `remove`, it still counts for its session and its key.
   */
  withdraw(run: R): "waiting" | "queued" | "running" {
    if (this.inLine(run)) {
      this.removeWaiting(run);
      return "waiting";
    }
    const at = this.queue.indexOf(run);
    if (at < 0) return "running";
    this.queue.splice(at, 1);
    return "queued";
  }

  /**
   * A withdrawn run has ended: it leaves, and its session's line looks again (a run that held the
   * session frees it; one that only waited changes nothing, which the line finds out).
   */
  remove(run: R): void {
    const admitted = this.admitted.delete(run.id);
    this.handlers.left(run);
    if (admitted) this.release(run.sessionId);
  }

  /**
   * Each session's line looks again whether its session is free: another instance's run of it
   * may have ended (the doorbell rang), which nothing here sees.
   */
  lookAgain(): void {
    for (const sessionId of this.lines.keys()) {
      if (!this.holdsSession(sessionId)) this.release(sessionId);
    }
  }

  /** Whether runs are admitted (until the server is told to stop). */
  get open(): boolean {
    return this.accepting;
  }

  /** Stops admitting runs; those admitted go on as they were. */
  stopAccepting(): void {
    this.accepting = false;
  }

  /**
   * Stops admitting runs and hands back those that had not started, queued and waiting, out of
   * the queue and the lines, for the caller to end (or hand over) and `remove`.
   */
  close(): { queued: R[]; waiting: R[] } {
    this.stopAccepting();
    const waiting = [...this.lines.values()].flat();
    for (const run of waiting) this.removeWaiting(run);
    return { queued: this.queue.splice(0), waiting };
  }

  get(runId: string): R | undefined {
    return this.admitted.get(runId);
  }

  /** Every run admitted that has not left. */
  all(): R[] {
    return [...this.admitted.values()];
  }

  /** The session's runs here: waiting, queued or running. */
  runsOf(sessionId: string): R[] {
    return this.all().filter((run) => run.sessionId === sessionId);
  }

  /** The session's line, oldest first. */
  waitingFor(sessionId: string): R[] {
    return [...(this.lines.get(sessionId) ?? [])];
  }

  /** True while a run of the session is waiting, queued or running here. */
  isActive(sessionId: string): boolean {
    return this.holdsSession(sessionId) || this.lines.has(sessionId);
  }

  counts(): { running: number; queued: number; waiting: number } {
    return { running: this.running, queued: this.queue.length, waiting: this.waitingCount() };
  }

  retryAfterSeconds(): number {
    const ahead = Math.ceil((this.queue.length + 1) / this.limits.maxConcurrent);
    return Math.max(1, ahead * SECONDS_PER_QUEUED_RUN);
  }

  private place(run: R) {
    if (this.running < this.limits.maxConcurrent) this.start(run);
    else this.queue.push(run);
  }

  private start(run: R) {
    this.running++;
    this.runningPerKey.set(run.keyId, (this.runningPerKey.get(run.keyId) ?? 0) + 1);
    this.handlers.start(run);
  }

  /** Takes the queued run whose turn it is: the first queued of the key running the fewest. */
  private takeNext(): R | undefined {
    let next = -1;
    let fewest = Number.POSITIVE_INFINITY;
    this.queue.forEach((run, at) => {
      const running = this.runningPerKey.get(run.keyId) ?? 0;
      if (running < fewest) {
        fewest = running;
        next = at;
      }
    });
    return next < 0 ? undefined : this.queue.splice(next, 1)[0];
  }

  private waitingCount(): number {
    let n = 0;
    for (const line of this.lines.values()) n += line.length;
    return n;
  }

  /** Whether a run here is queued or running on the session (not just waiting). */
  private holdsSession(sessionId: string): boolean {
    for (const run of this.admitted.values()) {
      if (run.sessionId === sessionId && !this.inLine(run)) return true;
    }
    return false;
  }

  private inLine(run: R): boolean {
    return this.lines.get(run.sessionId)?.includes(run) ?? false;
  }

  private enqueueWaiting(run: R) {
    const line = this.lines.get(run.sessionId) ?? [];
    line.push(run);
    this.lines.set(run.sessionId, line);
    this.linePoll ??= setInterval(() => this.lookAgain(), LINE_POLL_MS).unref();
  }

  private removeWaiting(run: R) {
    const line = this.lines.get(run.sessionId);
    if (line) {
      const at = line.indexOf(run);
      if (at >= 0) line.splice(at, 1);
      if (line.length === 0) this.lines.delete(run.sessionId);
    }
    if (this.lines.size === 0 && this.linePoll) {
      clearInterval(this.linePoll);
      this.linePoll = undefined;
    }
  }

  /** The session is free here: the first run in its line takes its turn. */
  private release(sessionId: string) {
    if (!this.accepting || !this.lines.has(sessionId)) return;
    void this.inAdmissionOrder(sessionId, () => this.takeTurn(sessionId)).catch((err) =>
      this.handlers.failed(sessionId, err),
    );
  }

  private async takeTurn(sessionId: string) {
    const next = this.lines.get(sessionId)?.[0];
    if (!next || !this.accepting || this.holdsSession(sessionId)) return;
    const promoted = await this.handlers.promote(next);
    if (promoted === "blocked") return;
    this.removeWaiting(next);
    if (promoted === "gone") {
      this.admitted.delete(next.id);
      this.handlers.left(next);
      return;
    }
    this.place(next);
  }
}
