// What a test made (servers, databases, CLIs, temp dirs), undone after the test or its file.

export type Cleanups = (() => Promise<void>)[];

/**
 * Runs and empties `cleanups`, the last made first. Each runs even when one before it failed (a
 * database that cannot be dropped must not leave the servers after it running), and the failures
 * are thrown at the end.
 */
export async function undo(cleanups: Cleanups): Promise<void> {
  const failures: unknown[] = [];
  for (const cleanup of cleanups.splice(0).reverse()) {
    try {
      await cleanup();
    } catch (err) {
      failures.push(err);
    }
  }
  if (failures.length === 1) throw failures[0];
  if (failures.length > 1) throw new AggregateError(failures, `${failures.length} cleanups failed`);
}
