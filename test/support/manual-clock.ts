import { setImmediate as nextTurn } from "node:timers/promises";
import type { Clock, Timer, TimerCallback } from "../../src/clock.js";

// A clock whose time moves only when the test says: `advance` fires each timer that falls due, in
// time order (set order for the same time), and waits for the work each one returns, so that the
// test can assert right after `await clock.advance(...)`.

interface ManualTimer extends Timer {
  at: number;
  /** Set for an interval. */
  every?: number;
  /** Order of setting: among timers due at the same time, the first set fires first. */
  seq: number;
  callback: TimerCallback;
}

export class ManualClock implements Clock {
  private time: number;
  private seq = 0;
  private readonly timers = new Set<ManualTimer>();

  /** Starts at `start` (ms since the epoch), the real time by default. */
  constructor(start: number = Date.now()) {
    this.time = start;
  }

  now(): number {
    return this.time;
  }

  setTimeout(callback: TimerCallback, ms: number): Timer {
    return this.add(callback, ms);
  }

  setInterval(callback: TimerCallback, ms: number): Timer {
    // As Node's: an interval under a millisecond is one of a millisecond.
    return this.add(callback, ms, Math.max(1, ms));
  }

  clear(timer: Timer | undefined): void {
    if (timer) this.timers.delete(timer as ManualTimer);
  }

  /** Timeouts and intervals set and not yet fired or cleared. */
  get pending(): number {
    return this.timers.size;
  }

  /** Moves time on by `ms`; see `advanceTo`. */
  advance(ms: number): Promise<void> {
    return this.advanceTo(this.time + ms);
  }

  /**
   * Moves time on to `to`, firing each timer due by then in time order, with the clock at its
   * time; resolves once each one's work, and what it set going at once, has settled.
   */
  async advanceTo(to: number | Date): Promise<void> {
    const target = typeof to === "number" ? to : to.getTime();
    if (target < this.time) throw new Error("a manual clock does not go back");
    await settle();
    for (let timer = this.next(target); timer; timer = this.next(target)) {
      this.time = timer.at;
      if (timer.every === undefined) this.timers.delete(timer);
      else timer.at += timer.every;
      await timer.callback();
      await settle();
    }
    this.time = target;
  }

  private add(callback: TimerCallback, ms: number, every?: number): ManualTimer {
    const timer: ManualTimer = {
      at: this.time + Math.max(1, ms),
      seq: this.seq++,
      callback,
      unref: () => timer,
      ...(every === undefined ? {} : { every }),
    };
    this.timers.add(timer);
    return timer;
  }

  /** The earliest timer due by `target`. */
  private next(target: number): ManualTimer | undefined {
    let first: ManualTimer | undefined;
    for (const timer of this.timers) {
      if (timer.at > target) continue;
      if (!first || timer.at < first.at || (timer.at === first.at && timer.seq < first.seq)) {
        first = timer;
      }
    }
    return first;
  }
}

/** Lets pending promise callbacks and I/O that is ready run: a few turns of the event loop. */
async function settle(): Promise<void> {
  for (let i = 0; i < 3; i++) await nextTurn();
}
