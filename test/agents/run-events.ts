import { expect } from "vitest";
import type { BridgeEvent, CompletionEvent } from "../../src/events.js";

// Reading a run's batches back, for the tests of the back-ends and of the Claude runner.

export async function collect(gen: AsyncGenerator<BridgeEvent[]>): Promise<BridgeEvent[]> {
  const events: BridgeEvent[] = [];
  for await (const batch of gen) events.push(...batch);
  return events;
}

/** Asserts that the run ended with exactly one completion, last, and returns it. */
export function completionOf(events: BridgeEvent[]): CompletionEvent {
  const completions = events.filter((e) => e.type === "completion");
  expect(completions).toHaveLength(1);
  const last = events.at(-1);
  if (last?.type !== "completion") throw new Error("last event is not the completion");
  return last;
}

/** The run's assistant text, its deltas joined. */
export const texts = (events: BridgeEvent[]) =>
  events.flatMap((e) => (e.type === "text_delta" ? [e.text] : [])).join("");
