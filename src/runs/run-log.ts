import { type BridgeEvent, PUBLIC_EVENT_TYPES } from "../events.js";
import { type EventBatch, type SequencedEvent, sequenced } from "../store/events.js";
import type { LogWriter } from "./log-writer.js";

/** Which numbering a reader follows: the default view, or `?events=full`. */
export type LogView = "public" | "full";

export interface CompletionPosition {
  seq: number;
  publicSeq: number;
}

/** A batch (one row) holds at most about this many characters, unless one event alone is longer. */
const MAX_BATCH_CHARS = 1 << 20;

/**
 * The event log of one run in progress. Events are numbered, written to the database in batches
 * by the LogWriter (whatever accumulated while the previous write was in flight, so a burst of
 * deltas costs a few statements, not one each), and only then reach subscribers: an event a
 * client has seen is always one the database has.
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
  private failure: unknown;
  /** Called once nothing is waiting to be written (or writing failed). */
  private drained: (() => void)[] = [];
  private readonly waiters = new Set<() => void>();
  private closed = false;

  constructor(
    private readonly writer: LogWriter,
    readonly runId: string,
  ) {}

  /** Numbers the event and queues it for the next batch. */
  append(event: BridgeEvent): void {
    this.pending.push(this.number(event));
    if (!this.failure) this.writer.schedule(this);
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
    if (this.pending.length > 0 && !this.failure) {
      await new Promise<void>((resolve) => this.drained.push(resolve));
    }
    if (this.failure) throw this.failure;
  }

  /** For the writer: the next events to store, up to the size of a batch. */
  takeBatch(): EventBatch | undefined {
    if (this.failure || this.pending.length === 0) return undefined;
    let chars = 0;
    let n = 0;
    let lastPublicSeq = this.storedPublicSeq;
    while (n < this.pending.length && (n === 0 || chars < MAX_BATCH_CHARS)) {
      const entry = this.pending[n++] as SequencedEvent;
      chars += entry.json.length;
      lastPublicSeq = entry.publicSeq ?? lastPublicSeq;
    }
    return { runId: this.runId, events: this.pending.slice(0, n), lastPublicSeq };
  }

  /** For the writer: the batch taken last is stored. */
  stored(batch: EventBatch): void {
    this.pending = this.pending.slice(batch.events.length);
    this.storedPublicSeq = batch.lastPublicSeq;
    this.publish(batch.events);
    if (this.pending.length > 0) this.writer.schedule(this);
    else this.settle();
  }

  /** For the writer: the batch taken last could not be stored; nothing more will be. */
  failed(err: unknown): void {
    this.failure = err;
    this.settle();
  }

  private settle() {
    for (const resolve of this.drained.splice(0)) resolve();
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
}
