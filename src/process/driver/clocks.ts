// The two clocks that end a run its CLI does not end (./drive.ts): the wall clock (a timeout) and
// the silence clock (a stall). Neither counts while the CLI waits for a reply of ours.

/** How often the run's wall clock looks whether the CLI waits for a reply of ours. */
const WALL_CLOCK_TICK_MS = 1000;

/** What the silence clock reads, kept up by the driver as the CLI writes and is written to. */
export interface Activity {
  /** When the CLI last wrote (stdout or stderr), or was last written to. */
  lastOutputAt: number;
  /** The driver holds the CLI's stdout paused: that silence is the driver's, not the CLI's. */
  paused: boolean;
}

/**
 * Calls `onTimeout` once the run has spent `timeoutMs` (0: never); returns what stops the clock.
 *
 * The run's wall clock stops while the CLI waits for our reply to a permission request: that wait
 * has a bound of its own (the approval timeout), which must be the one to end it. Waits stop it for
 * as long again at most, so that a run holds its slot for twice the timeout at most, however long
 * its requests may wait. Looked at every second, so a wait counts to within a second.
 */
export function startWallClock(
  timeoutMs: number,
  awaiting: () => boolean,
  onTimeout: () => void,
): () => void {
  if (timeoutMs <= 0) return () => {};
  let timer: NodeJS.Timeout | undefined;
  const startedAt = performance.now();
  let spent = 0;
  let since = startedAt;
  const check = () => {
    const now = performance.now();
    if (!awaiting()) spent += now - since;
    since = now;
    if (spent >= timeoutMs || now - startedAt >= 2 * timeoutMs) onTimeout();
    else timer = setTimeout(check, Math.min(timeoutMs - spent, WALL_CLOCK_TICK_MS));
  };
  timer = setTimeout(check, Math.min(timeoutMs, WALL_CLOCK_TICK_MS));
  return () => clearTimeout(timer);
}

/**
 * Calls `onIdle` once the CLI has been silent for `idleTimeoutMs` (0: never); returns what stops
 * the clock.
 */
export function startSilenceClock(
  idleTimeoutMs: number,
  activity: Activity,
  awaiting: () => boolean,
  onIdle: () => void,
): () => void {
  if (idleTimeoutMs <= 0) return () => {};
  let timer: NodeJS.Timeout | undefined;
  const check = () => {
    // While we hold stdout paused the silence is ours, not the CLI's.
    // So is the silence of a CLI waiting for our reply.
    if (awaiting()) activity.lastOutputAt = performance.now();
    const idleFor = activity.paused ? 0 : performance.now() - activity.lastOutputAt;
    if (idleFor >= idleTimeoutMs) onIdle();
    else timer = setTimeout(check, idleTimeoutMs - idleFor);
  };
  timer = setTimeout(check, idleTimeoutMs);
  return () => clearTimeout(timer);
}
