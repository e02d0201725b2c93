import { createParser, type EventSourceMessage } from "eventsource-parser";

// What the client's two SSE readers share (a run's events, the live feed): the messages of one
// response body, and how long to wait before connecting again.

export interface ReconnectOptions {
  /** Consecutive failed reconnects before giving up (default 8). */
  retries?: number;
  /** First delay before reconnecting, doubled on each failure up to 5 s (default 250 ms). */
  delayMs?: number;
}

const MAX_DELAY_MS = 5000;

/**
 * The messages of one SSE response body, in order; comments (keep-alives) and bare `id:` lines
 * are skipped. `what` names the stream in the error thrown for a server's `error` event (it could
 * not go on: reconnect). `onRetry` hears the server's `retry:`.
 */
export async function* sseMessages(
  body: ReadableStream<Uint8Array>,
  what: string,
  onRetry: (ms: number) => void,
): AsyncGenerator<EventSourceMessage, void, undefined> {
  const messages: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (message) => messages.push(message), onRetry });
  const decoder = new TextDecoder();
  const reader = body.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      parser.feed(decoder.decode(value, { stream: true }));
      for (const message of messages.splice(0)) {
        if (message.event === "error") {
          const { message: why } = JSON.parse(message.data) as { message?: string };
          throw new Error(`${what} failed: ${why ?? message.data}`);
        }
        yield message;
      }
    }
  } finally {
    // Closes the connection when the caller stops early (break, abort, error).
    reader.cancel().catch(() => {});
  }
}

/**
 * Waits before the next connection after `failures` failures in a row (the first after progress
 * counts as 1), `delayMs` doubled each time up to 5 s; throws `lastError` once `retries` failed.
 */
export function backOff(
  failures: number,
  retries: number,
  delayMs: number,
  lastError: unknown,
  signal: AbortSignal | undefined,
): Promise<void> {
  if (failures > retries) return Promise.reject(lastError);
  return sleep(Math.min(delayMs * 2 ** (failures - 1), MAX_DELAY_MS), signal);
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
