import type { Logger } from "../log.js";
import type { Metrics } from "../metrics.js";
import type { Database } from "../store/db.js";
import { appendEvents, type EventBatch } from "../store/events.js";
import type { RunLog } from "./run-log.js";

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));
const RETRY_DELAYS_MS = [50, 250, 1000, 3000];

/**
 * Writes the event logs of every run in progress: once per turn of the event loop, it takes what
 * each log has waiting and stores all of it in one statement. One statement per run and turn held
 * 50 concurrent runs streaming 200 lines a second each to about 3 700 events/s on PGlite, whose
 * cost is mostly per statement (`npm run bench`, README "Performance").
 *
 * Writes are one after another, so each log has at most one batch in flight, and its events are
 * stored in order.
 */
export class LogWriter {
  private readonly ready = new Set<RunLog>();
  private writing = false;

  private readonly metrics: Metrics | undefined;
  private readonly retryDelaysMs: readonly number[];

  constructor(
    private readonly db: Database,
    private readonly logger: Logger,
    options: { metrics?: Metrics; retryDelaysMs?: readonly number[] } = {},
  ) {
    this.metrics = options.metrics;
    this.retryDelaysMs = options.retryDelaysMs ?? RETRY_DELAYS_MS;
  }

  /** The log has events waiting: they go with the next statement. */
  schedule(log: RunLog): void {
    this.ready.add(log);
    if (!this.writing) {
      this.writing = true;
      void this.loop();
    }
  }

  private async loop(): Promise<void> {
    try {
      while (this.ready.size > 0) {
        // Waiting for the next turn lets each batch take every read of its CLI's stdout that this
        // turn's poll made (taking one read at a time: PGlite relay 107 000 -> 60 000 events/s).
        await nextTurn();
        const taken: [RunLog, EventBatch][] = [];
        for (const log of this.ready) {
          const batch = log.takeBatch();
          if (batch) taken.push([log, batch]);
        }
        this.ready.clear();
        await this.write(taken);
      }
    } finally {
      this.writing = false;
    }
  }

  /**
   * Stores the batches, retrying a failed statement; if it keeps failing, each batch is tried
   * alone, so that one run's bad batch fails only that run's log.
   */
  private async write(taken: [RunLog, EventBatch][]): Promise<void> {
    const error = await this.attempt(taken.map(([, batch]) => batch));
    if (!error) {
      for (const [log, batch] of taken) log.stored(batch);
      return;
    }
    for (const [log, batch] of taken) {
      const alone = taken.length > 1 ? await this.attempt([batch]) : error;
      if (alone) {
        this.logger.error("event log write failed", { run_id: batch.runId, error: String(alone) });
        log.failed(alone);
      } else log.stored(batch);
    }
  }

  /** Undefined when stored, else the last error. */
  private async attempt(batches: EventBatch[]): Promise<unknown> {
    for (let attempt = 0; ; attempt++) {
      try {
        const started = performance.now();
        await appendEvents(this.db, batches);
        const events = batches.reduce((n, batch) => n + batch.events.length, 0);
        this.metrics?.logWritten(events, (performance.now() - started) / 1000);
        return undefined;
      } catch (err) {
        const delay = this.retryDelaysMs[attempt];
        if (delay === undefined) return err;
        await new Promise((r) => setTimeout(r, delay));
      }
    }
  }
}
