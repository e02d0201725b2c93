import { type Backoff, backoffMs } from "../backoff.js";
import { describeDbError, transientDbError } from "./errors.js";

// How writes that must not be lost (a run's events, its completion) ride out a database outage: a
// statement that failed because the database was unreachable is tried again, with a growing
// delay, until the outage has lasted `outageBoundMs`; one the database refused is tried only
// twice more (a refused value is refused again).

const DELAYS: Backoff = { firstMs: 50, maxMs: 2000, jitter: false };
const RETRIES_OF_A_REFUSAL = 2;

/** The database stayed unreachable for longer than the outage bound. */
export class DatabaseOutageError extends Error {
  constructor(
    readonly boundMs: number,
    override readonly cause: unknown,
  ) {
    super(`${describeDbError(cause)} for more than ${boundMs / 1000} s`);
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Runs `task` until it succeeds; throws DatabaseOutageError past the bound, or the refusal. */
export async function withDbRetries<T>(task: () => Promise<T>, outageBoundMs: number): Promise<T> {
  let failures = 0;
  let firstFailure: number | undefined;
  let refusals = 0;
  for (;;) {
    try {
      return await task();
    } catch (err) {
      firstFailure ??= performance.now();
      const left = outageBoundMs - (performance.now() - firstFailure);
      if (transientDbError(err)) {
        if (left <= 0) throw new DatabaseOutageError(outageBoundMs, err);
      } else if (++refusals > RETRIES_OF_A_REFUSAL) {
        throw err;
      }
      await sleep(Math.max(0, Math.min(backoffMs(++failures, DELAYS), left)));
    }
  }
}
