// The one schedule for waits between tries: the database writes that ride out an outage
// (store/retry.ts) and the outbox's callbacks (hooks/outbox.ts).

export interface Backoff {
  /** The wait after the first failure. */
  firstMs: number;
  /** The longest wait, however many failures. */
  maxMs: number;
  /** A random point in the upper half of each wait, so that many waiters do not try together. */
  jitter: boolean;
}

/** The wait after `failures` failures in a row (from 1), in whole milliseconds: doubling, capped. */
export function backoffMs(failures: number, { firstMs, maxMs, jitter }: Backoff): number {
  const full = Math.min(maxMs, firstMs * 2 ** Math.max(0, failures - 1));
  return Math.round(jitter ? full / 2 + (Math.random() * full) / 2 : full);
}
