import { type Clock, systemClock, type Timer } from "../clock.js";
import { COMMANDS_CHANNEL } from "../store/commands.js";
import type { Listen } from "../store/db.js";
import { RUN_EVENTS_CHANNEL } from "../store/events.js";
import { FEED_CHANNEL } from "../store/feed.js";
import { WORK_CHANNEL } from "../store/run-claims.js";

// The doorbell: how this instance learns that another one stored events of a run it follows, or
// posted a command for a run it executes, or left a queued run for any instance to claim
// (src/runs/puller.ts). It is only a wake-up; what is new is read from the
// database. On Postgres, LISTEN on one dedicated connection: an owner rings (NOTIFY) once per
// stored batch, in the statement that stores it (src/store/events.ts), and when it posts a command
// (src/store/commands.ts). A NOTIFY sent while that connection is down is lost, so each (re)connect
// wakes everyone to read what they missed; so does each lease tick (a lost re-listen costs at most
// a lease interval). Where LISTEN does not work (PgBouncer in transaction mode), everyone is woken
// every poll interval instead. The embedded database is one process's alone: nothing rings there
// but the live feed, whose rows ring at commit on its one connection (src/store/feed.ts).

export interface DoorbellOptions {
  /** `notify`: LISTEN/NOTIFY; `poll`: every `pollMs`; `local`: one process on the database. */
  mode: "notify" | "poll" | "local";
  pollMs: number;
  /** Needed in `notify` mode. */
  listen?: Listen;
  /** This instance's id: a command ring names the instance it is for. */
  self: () => string;
  /** This instance's host: a ring for a pinned run names the host it is for. */
  host: string;
  /** Times the polls. */
  clock?: Clock;
}

/** A wait that a ring (or its own timer) ends early: what each watch below sleeps in. */
abstract class Wakeable {
  private waking: (() => void) | undefined;

  constructor(readonly close: () => void) {}

  /** Ends the current sleep, if any. */
  protected wake(): void {
    this.waking?.();
  }

  /** Resolves at the next wake, or when `signal` aborts. */
  protected sleep(signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = () => {
        signal?.removeEventListener("abort", done);
        this.waking = undefined;
        resolve();
      };
      this.waking = done;
      signal?.addEventListener("abort", done, { once: true });
    });
  }
}

/** A follower's wait for new events of one run. */
export class RunWatch extends Wakeable {
  /** The highest seq a ring announced. */
  private rung = 0;
  /** A ring that announced nothing in particular (a reconnect, a tick): read in any case. */
  private catchUp = false;

  ring(seq: number | null): void {
    if (seq === null) this.catchUp = true;
    else this.rung = Math.max(this.rung, seq);
    this.wake();
  }

  /**
   * Resolves true once the log may hold events after `seq` (a ring since the watch began that
   * the caller has not read past), false when `signal` aborts first.
   */
  async next(seq: number, signal?: AbortSignal): Promise<boolean> {
    while (!this.catchUp && this.rung <= seq) {
      if (signal?.aborted) return false;
      await this.sleep(signal);
    }
    this.catchUp = false;
    return !signal?.aborted;
  }
}

/** A live feed follower's wait for new feed rows (GET /v1/events). */
export class FeedWatch extends Wakeable {
  /** Rung since the last `next`: read in any case. */
  private rung = false;

  ring(): void {
    this.rung = true;
    this.wake();
  }

  /**
   * Resolves true once rung since the last call (or the watch began), or after `timeoutMs` (when
   * given: a read is due anyway), false when `signal` aborts.
   */
  async next(signal?: AbortSignal, timeoutMs?: number): Promise<boolean> {
    let due = false;
    const timer =
      timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            due = true;
            this.wake();
          }, timeoutMs);
    try {
      while (!this.rung && !due) {
        if (signal?.aborted) return false;
        await this.sleep(signal);
      }
    } finally {
      clearTimeout(timer);
    }
    this.rung = false;
    return !signal?.aborted;
  }
}

export class Doorbell {
  private readonly watches = new Map<string, Set<RunWatch>>();
  private readonly feedWatches = new Set<FeedWatch>();
  private commandsHandler: (() => void) | undefined;
  private workHandler: (() => void) | undefined;
  private timer: Timer | undefined;
  private readonly clock: Clock;

  constructor(private readonly opts: DoorbellOptions) {
    this.clock = opts.clock ?? systemClock;
  }

  /** Whether owners ring when they store events or post commands (only LISTEN hears it). */
  get rings(): boolean {
    return this.opts.mode === "notify";
  }

  /** Whether other instances share the database (not the embedded one). */
  get shared(): boolean {
    return this.opts.mode !== "local";
  }

  /** Starts hearing rings: resolves once listening (notify) or polling. */
  async start(): Promise<void> {
    const { mode, listen, pollMs } = this.opts;
    if (mode === "poll") {
      this.timer = this.clock.setInterval(() => this.ringEveryone(), pollMs);
      this.timer.unref();
    }
    // The feed is rung on every database, the embedded one too: a feed row is stored in the
    // transaction of what it reports, and heard once that commits (src/store/feed.ts).
    if (mode !== "poll" && listen) {
      await listen(
        FEED_CHANNEL,
        () => this.ringFeed(),
        () => this.ringFeed(),
      );
    }
    if (mode !== "notify") return;
    if (!listen) throw new Error("the notify doorbell needs a LISTEN connection");
    await listen(
      RUN_EVENTS_CHANNEL,
      (payload) => this.ringRun(payload),
      () => this.ringFollowers(),
    );
    await listen(
      COMMANDS_CHANNEL,
      (owner) => {
        if (owner === this.opts.self()) this.ringCommands();
      },
      () => this.ringCommands(),
    );
    await listen(
      WORK_CHANNEL,
      (host) => {
        if (host === "" || host === this.opts.host) this.ringWork();
      },
      () => this.ringWork(),
    );
  }

  stop(): void {
    this.clock.clear(this.timer);
  }

  /** Rings for the run's events from now on; `close` it when done. */
  watch(runId: string): RunWatch {
    const set = this.watches.get(runId) ?? new Set<RunWatch>();
    this.watches.set(runId, set);
    const watch = new RunWatch(() => {
      set.delete(watch);
      if (set.size === 0 && this.watches.get(runId) === set) this.watches.delete(runId);
    });
    set.add(watch);
    return watch;
  }

  /** Rings for new feed rows from now on; `close` it when done. */
  watchFeed(): FeedWatch {
    const watch = new FeedWatch(() => this.feedWatches.delete(watch));
    this.feedWatches.add(watch);
    return watch;
  }

  /** Called when commands may wait for this instance's runs. */
  onCommands(handler: () => void): void {
    this.commandsHandler = handler;
  }

  /** Called when queued runs may wait to be pulled (src/runs/queue.ts). */
  onWork(handler: () => void): void {
    this.workHandler = handler;
  }

  /** Wakes every follower, the command handler and the puller, to read what they may have missed. */
  ringEveryone(): void {
    this.ringFollowers();
    this.ringCommands();
    this.ringWork();
  }

  private ringWork() {
    this.workHandler?.();
  }

  private ringFollowers() {
    for (const set of this.watches.values()) for (const watch of set) watch.ring(null);
    this.ringFeed();
  }

  private ringFeed() {
    for (const watch of this.feedWatches) watch.ring();
  }

  private ringCommands() {
    this.commandsHandler?.();
  }

  /** A payload is `<run id> <last seq>`. */
  private ringRun(payload: string) {
    const [runId = "", seq] = payload.split(" ");
    const set = this.watches.get(runId);
    if (!set) return;
    const last = Number(seq);
    for (const watch of set) watch.ring(Number.isInteger(last) ? last : null);
  }
}
