import type { Logger } from "../log.js";
import type { Metrics } from "../metrics.js";
import type { Database } from "../store/db.js";
import { appendEvents, type EventBatch } from "../store/events.js";
import { DatabaseOutageError, withDbRetries } from "../store/retry.js";
import { RunAlreadyClosedError } from "../store/run-lifecycle.js";

/** What the writer needs of a run's log (RunLog): its next batch, and how writing it went. */
export interface WritableLog {
  /** The next events to store, up to the size of a batch. */
  takeBatch(): EventBatch | undefined;
  /** The batch taken last is stored. */
  stored(batch: EventBatch): void;
  /** The batch taken last could not be stored; nothing more will be. */
  failed(err: unknown): void;
}

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * Writes the event logs of every run in progress: once per turn of the event loop, it takes what
 * each log has waiting and stores all of it in one statement. One statement per run and turn held
 * 50 concurrent runs streaming 200 lines a second each to about 3 700 events/s on PGlite, whose
 * cost is mostly per statement (`npm run bench`, docs/performance.md).
 *
 * Writes are one after another, so each log has at most one batch in flight, and its events are
 * stored in order. While the database is unreachable the writer keeps trying (up to the outage
 * bound) and the logs' backlogs grow until their runs wait for it (RunLog.keepPace).
 */
export class LogWriter {
  private readonly ready = new Set<WritableLog>();
  private writing = false;

  private readonly metrics: Metrics | undefined;
  /** Each stored batch rings the doorbell of followers on other instances (src/cluster/). */
  private readonly ring: boolean;
  /** Told of each stored batch (the reply outbox watches runs' progress). */
  private readonly onStored: ((batch: EventBatch) => void) | undefined;

  constructor(
    private readonly db: Database,
    private readonly logger: Logger,
    private readonly outageBoundMs: number,
    options: { metrics?: Metrics; ring?: boolean; onStored?: (batch: EventBatch) => void } = {},
  ) {
    this.metrics = options.metrics;
    this.ring = options.ring ?? false;
    this.onStored = options.onStored;
  }

  /** The log has events waiting: they go with the next statement. */
  schedule(log: WritableLog): void {
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
        const taken: [WritableLog, EventBatch][] = [];
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
   * Stores the batches, retrying a failed statement; if the database refuses it, each batch is
   * tried alone, so that one run's bad batch fails only that run's log.
   */
  private async write(taken: [WritableLog, EventBatch][]): Promise<void> {
    const outcome = await this.attempt(taken.map(([, batch]) => batch));
    if (outcome instanceof Set) {
      for (const [log, batch] of taken) this.settle(log, batch, outcome);
      return;
    }
    const alone = taken.length > 1 && !(outcome.error instanceof DatabaseOutageError);
    for (const [log, batch] of taken) {
      const result = alone ? await this.attempt([batch]) : outcome;
      if (result instanceof Set) this.settle(log, batch, result);
      else {
        this.logger.error("event log write failed", {
          run_id: batch.runId,
          error: String(result.error),
        });
        log.failed(result.error);
      }
    }
  }

  /** A batch the statement did not store belongs to a run closed elsewhere: its log ends. */
  private settle(log: WritableLog, batch: EventBatch, stored: Set<string>) {
    if (stored.has(batch.runId)) {
      log.stored(batch);
      this.onStored?.(batch);
      return;
    }
    this.logger.warn("a run's events were refused: another instance has closed the run", {
      run_id: batch.runId,
    });
    log.failed(new RunAlreadyClosedError(batch.runId));
  }

  /** The runs whose batches were stored, else the error that ended the retries. */
  private async attempt(batches: EventBatch[]): Promise<Set<string> | { error: unknown }> {
    try {
      return await withDbRetries(async () => {
        const started = performance.now();
        const stored = await appendEvents(this.db, batches, { ring: this.ring });
        const events = batches.reduce((n, batch) => n + batch.events.length, 0);
        this.metrics?.logWritten(events, (performance.now() - started) / 1000);
        return stored;
      }, this.outageBoundMs);
    } catch (error) {
      return { error };
    }
  }
}
