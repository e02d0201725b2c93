// A task that runs one at a time, asked for from several places (a doorbell's ring, a lease tick,
// a run's end): asked while it runs, it runs once more right after, however often it was asked,
// so that nothing asked for meanwhile is missed and no two runs of it overlap.
export class OnceMore {
  private running: Promise<void> | undefined;
  private again = false;

  /** `task` must not reject: its failures are its own to record. */
  constructor(private readonly task: () => Promise<void>) {}

  /** Runs the task now, or once more right after the run in progress; settles when it has. */
  run(): Promise<void> {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      do {
        this.again = false;
        await this.task();
      } while (this.again);
    })().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }
}
