// The time the process's own timers and timestamps read: the real one in production, a manual one
// in tests (test/support/manual-clock.ts), so that a test of a lease's renewal, a poll, a backoff,
// a schedule or a timeout moves time on instead of waiting it out. Times the database decides
// (`now()` in SQL: lease expiry, claims) are not this clock's: every instance shares those.

/** A pending timeout or interval; `unref`ed, it does not keep the process alive. */
export interface Timer {
  unref(): unknown;
}

/**
 * A timer's callback. It may return a promise of its work, which a manual clock waits for before
 * it moves on; the real one ignores it, so it must not reject.
 */
export type TimerCallback = () => unknown;

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  setTimeout(callback: TimerCallback, ms: number): Timer;
  setInterval(callback: TimerCallback, ms: number): Timer;
  /** Cancels a timeout or an interval; `undefined` (none set) is ignored. */
  clear(timer: Timer | undefined): void;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  setInterval: (callback, ms) => setInterval(callback, ms),
  // Node's timers are cleared the same way whichever kind they are.
  clear: (timer) => clearTimeout(timer as NodeJS.Timeout | undefined),
};
