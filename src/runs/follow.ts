import { type LogView, positionIn, type SequencedEvent } from "../store/events.js";
import type { RunParts } from "./parts.js";

/**
 * Following a run's events: a run of this process from its log in memory, any other (of another
 * instance, or finished) from the stored log, woken by the doorbell; a follower switches between
 * them when the run moves between instances.
 */
export class Following {
  /** Followers reading a run from the stored log, told when this instance pulls it (adopts it). */
  private readonly followersOf = new Map<string, Set<AbortController>>();
  /** Clients following a run's events. */
  private following = 0;

  constructor(private readonly parts: RunParts) {}

  /** How many clients follow a run now. */
  get subscribers(): number {
    return this.following;
  }

  /** This instance pulled the run: its followers read it from memory from now on. */
  adopted(runId: string): void {
    for (const follower of this.followersOf.get(runId) ?? []) follower.abort();
  }

  /**
   * The run's events after position `after` of the view, then live ones until its completion, in
   * batches of consecutive events.
   */
  async *events(
    runId: string,
    view: LogView,
    after: number,
    signal?: AbortSignal,
  ): AsyncGenerator<SequencedEvent[]> {
    const { admission, execution, opts } = this.parts;
    this.following++;
    let position = after;
    // Set once this instance handed the run over: its log in memory says no more.
    let handedOver = false;
    try {
      for (;;) {
        // Registered before looking: a pull by this instance, from now on, switches to memory.
        const adopted = new AbortController();
        const followers = this.followersOf.get(runId) ?? new Set();
        this.followersOf.set(runId, followers.add(adopted));
        try {
          const live = handedOver
            ? undefined
            : (admission.get(runId)?.log ?? execution.unrecordedLog(runId));
          if (live) {
            for await (const batch of live.subscribe(view, position, signal)) {
              yield batch;
              const last = batch.at(-1);
              if (last) position = positionIn(view, last);
            }
            if (!live.handedOver || signal?.aborted) return;
            handedOver = true;
            continue;
          }
          const either = signal ? AbortSignal.any([signal, adopted.signal]) : adopted.signal;
          for await (const batch of opts.cluster.remote.follow(runId, view, position, either)) {
            yield batch;
            const last = batch.at(-1);
            if (last) position = positionIn(view, last);
          }
        } finally {
          followers.delete(adopted);
          if (followers.size === 0) this.followersOf.delete(runId);
        }
        if (!adopted.signal.aborted || signal?.aborted) return;
        // This instance pulled it: its log is in memory again.
        handedOver = false;
      }
    } finally {
      this.following--;
    }
  }
}
