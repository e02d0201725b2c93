import type { EventSourceMessage } from "eventsource-parser";
import { ApiProblem } from "./problem.js";
import type { components } from "./schema.js";
import { backOff, type ReconnectOptions, sseMessages } from "./sse.js";

// Reading the live feed (GET /v1/events) over SSE: it never ends by itself; when the connection
// drops, reconnect with `Last-Event-ID` (the last event's id, or the position the server said the
// stream started from), so that no event is lost or repeated.

export type FeedEvent = components["schemas"]["FeedEvent"];
export type FeedEventType = FeedEvent["type"];
/** A feed event with its place in the feed (the SSE `id:`: an opaque string to resume after). */
export type FeedItem = FeedEvent & { id: string };

/** Opens the feed after `after` (undefined: from now); its body and the position it starts after. */
export type OpenFeed = (
  after: string | undefined,
  signal?: AbortSignal,
) => Promise<{ body: ReadableStream<Uint8Array>; position: string }>;

export async function* readFeed(
  open: OpenFeed,
  options: { after?: string; signal?: AbortSignal; reconnect?: ReconnectOptions },
): AsyncGenerator<FeedItem, void, undefined> {
  const { signal } = options;
  const retries = options.reconnect?.retries ?? 8;
  let delayMs = options.reconnect?.delayMs ?? 250;
  let last = options.after;
  let failures = 0;
  let lastError: unknown;
  for (;;) {
    signal?.throwIfAborted();
    let progressed = false;
    try {
      const { body, position } = await open(last, signal);
      if (last === undefined) last = position;
      for await (const item of parseFeed(body, (ms) => {
        delayMs = ms;
      })) {
        // The server resumes strictly after the position given, so nothing repeats; a reset moves
        // the position back to where the feed now begins.
        last = item.id;
        progressed = true;
        yield item;
        signal?.throwIfAborted();
      }
      lastError = new Error("the feed's stream closed");
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      if (err instanceof ApiProblem && err.status < 500) throw err;
      lastError = err;
    }
    failures = progressed ? 1 : failures + 1;
    await backOff(failures, retries, delayMs, lastError, signal);
  }
}

/** The feed events of one SSE response body, in order; comments and bare `id:` lines skipped. */
async function* parseFeed(
  body: ReadableStream<Uint8Array>,
  onRetry: (ms: number) => void,
): AsyncGenerator<FeedItem, void, undefined> {
  for await (const message of sseMessages(body, "the feed's stream", onRetry)) {
    yield toItem(message);
  }
}

function toItem(message: EventSourceMessage): FeedItem {
  const id = message.id;
  if (!id) throw new Error(`feed event without an id: ${message.event}`);
  return { ...(JSON.parse(message.data) as FeedEvent), id };
}
