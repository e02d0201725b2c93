import { createParser, type EventSourceMessage } from "eventsource-parser";
import { ApiProblem } from "./problem.js";
import type { components } from "./schema.js";

// Reading a run's events over SSE: parse with eventsource-parser, and when the connection drops
// before the `completion`, reconnect with `Last-Event-ID` so that no event is lost or repeated.

export type BridgeEvent = components["schemas"]["BridgeEvent"];
export type BridgeEventType = BridgeEvent["type"];
export type CompletionEvent = components["schemas"]["CompletionEvent"];
/** A BridgeEvent with its number in the run (the SSE `id:`, from 1, no gaps). */
export type StreamedEvent = BridgeEvent & { id: number };

export interface ReconnectOptions {
  /** Consecutive failed reconnects before giving up (default 8). */
  retries?: number;
  /** First delay before reconnecting, doubled on each failure up to 5 s (default 250 ms). */
  delayMs?: number;
}

/** Opens the run's event stream after event `after`; throws ApiProblem when the server says no. */
export type OpenEvents = (
  after: number,
  signal?: AbortSignal,
) => Promise<ReadableStream<Uint8Array>>;

const MAX_DELAY_MS = 5000;

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
    if (failures > retries) throw lastError;
    await sleep(Math.min(delayMs * 2 ** (failures - 1), MAX_DELAY_MS), signal);
  }
}

/** The events of one SSE response body, in order; comments (keep-alives) are skipped. */
export async function* parseEvents(
  body: ReadableStream<Uint8Array>,
  onRetry: (ms: number) => void = () => {},
): AsyncGenerator<StreamedEvent, void, undefined> {
  const messages: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (message) => messages.push(message), onRetry });
  const decoder = new TextDecoder();
  const reader = body.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      parser.feed(decoder.decode(value, { stream: true }));
      for (const message of messages.splice(0)) yield toEvent(message);
    }
  } finally {
    // Closes the connection when the caller stops early (break, abort, error).
    reader.cancel().catch(() => {});
  }
}

function toEvent(message: EventSourceMessage): StreamedEvent {
  // The server could not go on with the stream (it says why); the run goes on: reconnect.
  if (message.event === "error") {
    const { message: why } = JSON.parse(message.data) as { message?: string };
    throw new Error(`the event stream failed: ${why ?? message.data}`);
  }
  const id = Number(message.id);
  if (!Number.isInteger(id) || id < 1)
    throw new Error(`SSE event without a valid id: ${message.id}`);
  const data: BridgeEvent = JSON.parse(message.data);
  return { ...data, id };
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
