import type { EventSourceMessage } from "eventsource-parser";
import { ApiProblem } from "./problem.js";
import type { components } from "./schema.js";
import { backOff, type ReconnectOptions, sseMessages } from "./sse.js";

export type { ReconnectOptions };

// Reading a run's events over SSE: parse with eventsource-parser, and when the connection drops
// before the `completion`, reconnect with `Last-Event-ID` so that no event is lost or repeated.

export type BridgeEvent = components["schemas"]["BridgeEvent"];
export type BridgeEventType = BridgeEvent["type"];
export type CompletionEvent = components["schemas"]["CompletionEvent"];
/** A BridgeEvent with its number in the run (the SSE `id:`, from 1, no gaps). */
export type StreamedEvent = BridgeEvent & { id: number };

/** Opens the run's event stream after event `after`; throws ApiProblem when the server says no. */
export type OpenEvents = (
  after: number,
  signal?: AbortSignal,
) => Promise<ReadableStream<Uint8Array>>;

export async function* readRunEvents(
  first: ReadableStream<Uint8Array> | undefined,
  open: OpenEvents,
  options: { after?: number; signal?: AbortSignal; reconnect?: ReconnectOptions },
): AsyncGenerator<StreamedEvent, void, undefined> {
  const { signal } = options;
  const retries = options.reconnect?.retries ?? 8;
  let delayMs = options.reconnect?.delayMs ?? 250;
  let last = options.after ?? 0;
  let body = first;
  let failures = 0;
  let lastError: unknown;
  for (;;) {
    signal?.throwIfAborted();
    const before = last;
    try {
      body ??= await open(last, signal);
      for await (const event of parseEvents(body, (ms) => {
        delayMs = ms;
      })) {
        if (event.id <= last) continue; // already seen before a reconnect
        last = event.id;
        yield event;
        if (event.type === "completion") return;
        // Events already read are not handed out once the caller has aborted.
        signal?.throwIfAborted();
      }
      lastError = new Error(`the event stream closed before the run's completion`);
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      // The server answered: a client error will not go away by asking again.
      if (err instanceof ApiProblem && err.status < 500) throw err;
      lastError = err;
    }
    body = undefined;
    failures = last > before ? 1 : failures + 1;
    await backOff(failures, retries, delayMs, lastError, signal);
  }
}

/** The events of one SSE response body, in order; comments (keep-alives) are skipped. */
export async function* parseEvents(
  body: ReadableStream<Uint8Array>,
  onRetry: (ms: number) => void = () => {},
): AsyncGenerator<StreamedEvent, void, undefined> {
  // A server's `error` event: it could not go on with the stream (it says why); the run goes on.
  for await (const message of sseMessages(body, "the event stream", onRetry)) {
    yield toEvent(message);
  }
}

function toEvent(message: EventSourceMessage): StreamedEvent {
  const id = Number(message.id);
  if (!Number.isInteger(id) || id < 1)
    throw new Error(`SSE event without a valid id: ${message.id}`);
  const data: BridgeEvent = JSON.parse(message.data);
  return { ...data, id };
}
