// The queue between a CLI's process (its lines, its exit, the run's clocks and signals) and the
// driver's read loop (./drive.ts), which takes what came while it was busy in one go.

/** Taken items before the array is cut down to what is left (when they are most of it). */
const COMPACT_AFTER = 1024;

/**
 * An unbounded FIFO with one waiting reader. An item taken is no longer held: a parsed line holds
 * slices of the chunk it was read from, and the taken lines a queue kept until its next compaction
 * (up to COMPACT_AFTER a run) outlived the young generation's collections, which moved them and
 * their chunks into the old generation, to be freed only by a full collection.
 */
export class Inbox<T> {
  private items: (T | undefined)[] = [];
  private head = 0;
  private waiter: (() => void) | undefined;

  get length(): number {
    return this.items.length - this.head;
  }

  push(item: T): void {
    this.items.push(item);
    const wake = this.waiter;
    this.waiter = undefined;
    wake?.();
  }

  /** The next item if there is one, without waiting. */
  shift(): T | undefined {
    if (this.length === 0) return undefined;
    const item = this.items[this.head] as T;
    this.items[this.head] = undefined;
    this.head++;
    if (this.head === this.items.length) {
      this.items = [];
      this.head = 0;
    } else if (this.head > COMPACT_AFTER && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return item;
  }

  async next(): Promise<T> {
    while (this.length === 0) {
      await new Promise<void>((resolve) => {
        this.waiter = resolve;
      });
    }
    return this.shift() as T;
  }
}
