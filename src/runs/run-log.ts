import { type BridgeEvent, PUBLIC_EVENT_TYPES } from "../events.js";
import type { Database } from "../store/db.js";
import {
  type EventBatch,
  type LogView,
  positionIn,
  type SequencedEvent,
  sequenced,
} from "../store/events.js";
import type { LogWriter, WritableLog } from "./log-writer.js";
import { readStoredLog } from "./stored-log.js";

export interface CompletionPosition {
  seq: number;
  publicSeq: number;
}

/** A batch (one row) holds at most about this many characters, unless one event alone is longer. */
const MAX_BATCH_CHARS = 1 << 20;

/**
 * Stored events kept in memory for subscribers, per view: between this many and twice as many, the
 * last batch stored whole within that.
 * Holding a whole run took 160 bytes an event (160 MB for a million deltas); a subscriber further
 * behind reads the database.
 */
const KEPT_EVENTS = 4096;

/** Events waiting to be stored beyond which the run waits for the database (see keepPace). */
export const MAX_BACKLOG = 8192;

/** The events of one view kept in memory: `events[i]` is at position `dropped + i + 1`. */
interface Kept {
  events: SequencedEvent[];
  dropped: number;
}

/**
 * The event log of one run in progress. Events are numbered, written to the database in batches
 * by the LogWriter (whatever accumulated while the previous write was in flight, so a burst of
 * deltas costs a few statements, not one each), and only then reach subscribers: an event a
 * client has seen is always one the database has. Memory keeps the latest stored events; a
 * subscriber behind them reads the database until it has caught up.
 */
export class RunLog implements WritableLog {
  /** Stored events of each view, the latest `keep` to `2 * keep` of them. */
  private readonly fullView: Kept = { events: [], dropped: 0 };
  private readonly publicView: Kept = { events: [], dropped: 0 };
  private pending: SequencedEvent[] = [];
  private nextSeq = 1;
  private nextPublicSeq = 1;
  private failure: unknown;
  /** Called once nothing is waiting to be written (or writing failed). */
  private drained: (() => void)[] = [];
  private readonly waiters = new Set<() => void>();
  private closed = false;
  /** Set by handOver: another instance runs it, and stores its events. */
  handedOver = false;
  /** See every event as it is appended (tracing, the debug capture). */
  private readonly observers: ((event: BridgeEvent) => void)[] = [];
  /** The agent's session id to record with the batches until one that carries it is stored. */
  private agentSessionId: string | undefined;

  constructor(
    private readonly writer: LogWriter,
    readonly runId: string,
    /** Where a subscriber behind what memory keeps reads the rest. */
    private readonly db: Database,
    private readonly keep = KEPT_EVENTS,
  ) {}

  /** Lets `observer` see each event appended from now on, the completion included. */
  observe(observer: (event: BridgeEvent) => void): void {
    this.observers.push(observer);
  }

  /**
   * The agent's own session id, named by the event appended next: the statement that stores that
   * event records it on the run and its session too.
   */
  nameAgentSession(id: string): void {
    this.agentSessionId = id;
  }

  /** Numbers the event and queues it for the next batch. */
  append(event: BridgeEvent): void {
    for (const observer of this.observers) observer(event);
    const entry = this.number(event);
    // Once writing failed nothing more is stored; the run's completion reports the failure.
    if (this.failure) return;
    this.pending.push(entry);
    this.writer.schedule(this);
  }

  /**
   * Waits while the database is MAX_BACKLOG events behind, until it has caught up: the caller
   * stops reading the CLI meanwhile, so a slow (or unreachable) database holds the CLI back
   * rather than the events piling up in memory. Throws once the log could not be written.
   */
  async keepPace(): Promise<void> {
    if (this.failure) throw this.failure;
    if (this.pending.length >= MAX_BACKLOG) await this.drain();
  }

  /**
   * The completion's place, last and public: right after the last event stored, so that the log
   * has no gap even when writing failed (events never stored were never sent either). Call once
   * the log is drained or has failed; the caller persists the completion in its own transaction.
   */
  completionPosition(): CompletionPosition {
    this.pending = [];
    return {
      seq: this.fullView.dropped + this.fullView.events.length + 1,
      publicSeq: this.publicView.dropped + this.publicView.events.length + 1,
    };
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
    // The default view's position at the end of what is stored (and published).
    let lastPublicSeq = this.publicView.dropped + this.publicView.events.length;
    while (n < this.pending.length && (n === 0 || chars < MAX_BATCH_CHARS)) {
      const entry = this.pending[n++] as SequencedEvent;
      chars += entry.json.length;
      lastPublicSeq = entry.publicSeq ?? lastPublicSeq;
    }
    const { agentSessionId } = this;
    return {
      runId: this.runId,
      events: this.pending.slice(0, n),
      lastPublicSeq,
      ...(agentSessionId ? { agentSessionId } : {}),
    };
  }

  /** For the writer: the batch taken last is stored. */
  stored(batch: EventBatch): void {
    this.pending = this.pending.slice(batch.events.length);
    if (batch.agentSessionId === this.agentSessionId) this.agentSessionId = undefined;
    this.publish(batch.events);
    if (this.pending.length > 0) this.writer.schedule(this);
    else this.settle();
  }

  /** Whether writing failed (past the database's outage bound, or refused): nothing more is stored. */
  hasFailed(): boolean {
    return this.failure !== undefined;
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
    this.showObservers(last);
    this.publish([last]);
    this.closed = true;
    this.notify();
  }

  /**
   * The run ended with `last`, which this instance could not store (yet): observers see it, but
   * no subscriber does. They wait until handOver sends them to the stored log, so that the
   * completion a client gets is the stored one, whoever stored it (this instance once the
   * database is back, or another that closed the run meanwhile).
   */
  endUnstored(last: SequencedEvent): void {
    this.showObservers(last);
  }

  private showObservers(last: SequencedEvent) {
    if (this.observers.length === 0) return;
    // As stored: the completion with what the recorder added (the session's usage).
    const event = JSON.parse(last.json) as BridgeEvent;
    for (const observer of this.observers) observer(event);
  }

  /**
   * Subscribers stop here (handedOver says why) and follow the run from the stored log: it went
   * back to the database's queue before it started, for another instance to run, or its
   * completion is the one stored, not this instance's (see endUnstored).
   */
  handOver(): void {
    this.handedOver = true;
    this.closed = true;
    this.notify();
  }

  /** Every event after `after` in the given view, then the new ones as they are persisted. */
  async *subscribe(
    view: LogView,
    after: number,
    signal?: AbortSignal,
  ): AsyncGenerator<SequencedEvent[]> {
    const kept = view === "full" ? this.fullView : this.publicView;
    let next = Math.max(0, after);
    while (!signal?.aborted) {
      if (next < kept.dropped) {
        const from = next;
        for await (const batch of readStoredLog(this.db, this.runId, view, next)) {
          const last = batch.at(-1);
          if (!last) continue;
          next = positionIn(view, last);
          yield batch;
          if (signal?.aborted) return;
        }
        // Every event memory let go of was stored first: not finding it is a broken log.
        if (next === from) throw new Error(`run ${this.runId}: stored log ends at ${from}`);
        continue;
      }
      if (next < kept.dropped + kept.events.length) {
        const batch = kept.events.slice(next - kept.dropped);
        next = kept.dropped + kept.events.length;
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
    let publicAdded = 0;
    for (const entry of batch) {
      this.fullView.events.push(entry);
      if (entry.publicSeq !== null) {
        this.publicView.events.push(entry);
        publicAdded++;
      }
    }
    const views = [
      [this.fullView, batch.length],
      [this.publicView, publicAdded],
    ] as const;
    for (const [kept, added] of views) {
      // Half at a time, so that trimming costs O(1) an event. Not into the batch just stored
      // (up to twice `keep`), which the live subscribers have yet to read: trimmed, it sent each
      // of them to the database for events still in hand.
      if (kept.events.length >= 2 * this.keep) {
        const excess = kept.events.length - Math.max(this.keep, Math.min(added, 2 * this.keep));
        kept.events.splice(0, excess);
        kept.dropped += excess;
      }
    }
    this.notify();
  }

  private notify() {
    for (const wake of [...this.waiters]) wake();
  }
}
