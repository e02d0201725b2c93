import { backoffMs } from "../backoff.js";
import { type Clock, systemClock, type Timer } from "../clock.js";
import { errorText, type Logger } from "../log.js";

// What the callback outbox and the reply outbox share: a loop that polls for due rows (and is
// poked when one falls due), takes each with its own conditional claim, and the schedule of
// retries after a failure. The rows, the claims and the sending are each outbox's own.

export interface OutboxLoopOptions {
  /** Named in the log when a pass fails. */
  name: string;
  logger: Logger;
  pollMs: number;
  clock?: Clock;
  /** The ids of rows due at `now`, a batch of them. */
  due: (now: Date) => Promise<string[]>;
  /** Claims the row and makes one attempt; another worker may have it (then nothing). */
  attempt: (id: string) => Promise<void>;
}

/** The most due rows one query takes. */
export const OUTBOX_BATCH = 16;
/** How long past its timeout a claimed attempt holds its row, should this process die sending. */
export const LEASE_MARGIN_MS = 5000;

export interface RetryPolicy {
  maxAttempts: number;
  backoffMinMs: number;
  backoffMaxMs: number;
}

/**
 * After `failures` failures in a row: given up (`failed`), or when to try again: when the other
 * side asked (`retryAt`, but within MAX_ASKED_WAIT_MS or the longest backoff: a hostile or
 * broken answer's `Retry-After: 9999999` holds nothing for months), else after a jittered backoff;
 * at once when the server is stopping (the next process tries it).
 */
/** The longest wait the other side may ask for: GitHub's and GitLab's rate limits reset within an hour. */
export const MAX_ASKED_WAIT_MS = 60 * 60 * 1000;

export function retryAfterFailure(
  failures: number,
  policy: RetryPolicy,
  now: number,
  opts: { retryAt?: number | null; stopped: boolean },
): { failed: boolean; at: number } {
  const wait = backoffMs(failures, {
    firstMs: policy.backoffMinMs,
    maxMs: policy.backoffMaxMs,
    jitter: true,
  });
  const longest = now + Math.max(policy.backoffMaxMs, MAX_ASKED_WAIT_MS);
  const asked = opts.retryAt == null ? null : Math.min(opts.retryAt, longest);
  const at = opts.stopped ? now : (asked ?? now + wait);
  return { failed: failures >= policy.maxAttempts, at };
}

export class OutboxLoop {
  private timer: Timer | undefined;
  private draining: Promise<void> | undefined;
  private again = false;
  /** Resolved when the pass asked for while one was running has finished. */
  private passAsked: (() => void)[] = [];
  private stopped = false;
  private readonly stopper = new AbortController();
  readonly clock: Clock;

  constructor(private readonly opts: OutboxLoopOptions) {
    this.clock = opts.clock ?? systemClock;
  }

  /** Aborted when the loop stops: an attempt in flight is abandoned. */
  get stopping(): AbortSignal {
    return this.stopper.signal;
  }

  get isStopped(): boolean {
    return this.stopped;
  }

  start() {
    this.stopped = false;
    this.timer = this.clock.setInterval(() => this.poke(), this.opts.pollMs);
    this.timer.unref();
    void this.poke();
  }

  /**
   * Looks for due rows now; resolves once a pass that started after the call has finished, so
   * that what it sends has been sent (or tried).
   */
  poke(): Promise<void> {
    if (this.stopped) {
      for (const resolve of this.passAsked.splice(0)) resolve();
      return Promise.resolve();
    }
    if (this.draining) {
      this.again = true;
      return new Promise((resolve) => this.passAsked.push(resolve));
    }
    const asked = this.passAsked.splice(0);
    this.draining = this.drain()
      .catch((err) => this.opts.logger.error(`${this.opts.name} failed`, { error: errorText(err) }))
      .finally(() => {
        this.draining = undefined;
        for (const resolve of asked) resolve();
        if (this.again) {
          this.again = false;
          void this.poke();
        }
      });
    return this.draining;
  }

  /** Stops looking; an attempt in flight is abandoned and retried by the next process. */
  async stop() {
    this.stopped = true;
    this.clock.clear(this.timer);
    this.stopper.abort();
    await this.draining;
  }

  private async drain() {
    while (!this.stopped) {
      const due = await this.opts.due(new Date(this.clock.now()));
      if (due.length === 0) return;
      await Promise.all(due.map((id) => this.opts.attempt(id)));
    }
  }
}
