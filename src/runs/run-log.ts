import { type BridgeEvent, PUBLIC_EVENT_TYPES } from "../events.js";
import type { Logger } from "../log.js";
import type { Database } from "../store/db.js";
import { appendEvents, type SequencedEvent, sequenced } from "../store/events.js";

/** Which numbering a reader follows: the default view, or `?events=full`. */
export type LogView = "public" | "full";

export interface CompletionPosition {
  seq: number;
  publicSeq: number;
}

/** A batch (one row) holds at most about this many characters, unless one event alone is longer. */
const MAX_BATCH_CHARS = 1 << 20;
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));
const RETRY_DELAYS_MS = [50, 250, 1000, 3000];

/**
 * The event log of one run in progress. Events are numbered, written to the database in
 * batches (whatever accumulated while the previous write was in flight, so a burst of deltas
 * costs a few round-trips, not one each), and only then reach subscribers: an
 * event a client has seen is always one the database has.
 */
export class RunLog {
  /** Persisted events: `all[i].seq === i + 1`, `visible[i].publicSeq === i + 1`. */
  private readonly all: SequencedEvent[] = [];
  private readonly visible: SequencedEvent[] = [];
  private pending: SequencedEvent[] = [];
  private nextSeq = 1;
  private nextPublicSeq = 1;
  /** The default view's position at the end of what is stored. */
  private storedPublicSeq = 0;
  private flushing: Promise<void> | undefined;
  private failure: unknown;
  private readonly waiters = new Set<() => void>();
  private closed = false;

  constructor(
    private readonly db: Database,
    readonly runId: string,
    private readonly logger: Logger,
  ) {}

  /** Numbers the event and queues it for the next batch. */
  append(event: BridgeEvent): void {
    this.pending.push(this.number(event));
    this.flushing ??= this.flushLoop();
  }

  /** The completion's place, last and public; the caller persists it in its own transaction. */
  completionPosition(): CompletionPosition {
    return { seq: this.nextSeq++, publicSeq: this.nextPublicSeq++ };
  }

  private number(event: BridgeEvent): SequencedEvent {
    const publicSeq = PUBLIC_EVENT_TYPES.has(event.type) ? this.nextPublicSeq++ : null;
    return sequenced(event, this.nextSeq++, publicSeq);
  }

  /** Resolves once every appended event is persisted; rejects if the database refused them. */
  async drain(): Promise<void> {
    while (this.flushing) await this.flushing;
    if (this.failure) throw this.failure;
  }

  /** Publishes the last event, persisted by the caller, and closes the log. */
  close(last: SequencedEvent): void {
    this.publish([last]);
    this.closed = true;
    this.notify();
  }

  /** Every event after `after` in the given view, then the new ones as they are persisted. */
  async *subscribe(
    view: LogView,
    after: number,
    signal?: AbortSignal,
  ): AsyncGenerator<SequencedEvent[]> {
    const events = view === "full" ? this.all : this.visible;
    let next = Math.max(0, after);
    while (!signal?.aborted) {
      if (next < events.length) {
        const batch = events.slice(next);
        next = events.length;
        yield batch;
        continue;
      }
      if (this.closed) return;
      await new Promise<void>((resolve) => {
        const wake = () => {
          this.waiters.delete(wake);
          signal?.removeEventListener("abort", wake);
          resolve();
        };
        this.waiters.add(wake);
        signal?.addEventListener("abort", wake, { once: true });
      });
    }
  }

  private publish(batch: SequencedEvent[]) {
    for (const entry of batch) {
      this.all.push(entry);
      if (entry.publicSeq !== null) this.visible.push(entry);
    }
    this.notify();
  }

  private notify() {
    for (const wake of [...this.waiters]) wake();
  }

  private async flushLoop(): Promise<void> {
    try {
      while (this.pending.length > 0 && !this.failure) {
        // Waiting for the next turn of the event loop lets a batch take every read of the CLI's
        // stdout that this turn's poll made. Without the wait a batch held one read (taking the
        // runner's batch a microtask later: PGlite relay 92 000 -> 60 000 events/s), or, before
        // the runner handed over batches, what arrived during the previous write's few awaits.
        await nextTurn();
        const batch = this.takeBatch();
        if (!(await this.write(batch))) return;
        this.pending = this.pending.slice(batch.length);
        this.publish(batch);
      }
    } finally {
      this.flushing = undefined;
    }
  }

  private takeBatch(): SequencedEvent[] {
    let chars = 0;
    let n = 0;
    while (n < this.pending.length && (n === 0 || chars < MAX_BATCH_CHARS)) {
      chars += this.pending[n]?.json.length ?? 0;
      n++;
    }
    return this.pending.slice(0, n);
  }

  private async write(batch: SequencedEvent[]): Promise<boolean> {
    let lastPublicSeq = this.storedPublicSeq;
    for (const entry of batch) lastPublicSeq = entry.publicSeq ?? lastPublicSeq;
    for (let attempt = 0; ; attempt++) {
      try {
        await appendEvents(this.db, this.runId, batch, lastPublicSeq);
        this.storedPublicSeq = lastPublicSeq;
        return true;
      } catch (err) {
        const delay = RETRY_DELAYS_MS[attempt];
        if (delay === undefined) {
          this.failure = err;
          this.logger.error("event log write failed", { run_id: this.runId, error: String(err) });
          return false;
        }
        await new Promise((r) => setTimeout(r, delay));
      }
    }
  }
}
