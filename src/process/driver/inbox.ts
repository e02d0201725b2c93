// The queue between a CLI's process (its lines, its exit, the run's clocks and signals) and the
// driver's read loop (./drive.ts), which takes what came while it was busy in one go.

/** An unbounded FIFO with one waiting reader. */
export class Inbox<T> {
  private items: T[] = [];
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
    this.head++;
    if (this.head > 1024 && this.head * 2 > this.items.length) {
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
