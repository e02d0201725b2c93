import { bareCompletion } from "../events.js";
import type { Logger } from "../log.js";
import type { LogView, SequencedEvent } from "../runs/run-log.js";

const encoder = new TextEncoder();

/** One SSE frame: `id:` is the event's position in the view the client reads. */
export function sseFrame(entry: SequencedEvent, view: LogView): string {
  const id = view === "full" ? entry.seq : entry.publicSeq;
  return `id: ${id}\nevent: ${entry.event.type}\ndata: ${JSON.stringify(entry.event)}\n\n`;
}

export const SSE_HEADERS = {
  "Content-Type": "text/event-stream; charset=utf-8",
  "Cache-Control": "no-cache, no-transform",
  // Tells nginx-style proxies not to buffer the stream.
  "X-Accel-Buffering": "no",
} as const;

/**
 * Streams a run's events as SSE until its completion, with a comment line every `keepAliveMs`
 * so that idle proxies keep the connection. A client that goes away only ends its subscription;
 * the run goes on. A failure after the response has started cannot become an HTTP error, so it
 * ends the stream with a `completion` saying so.
 */
export function sseResponse(
  open: (signal: AbortSignal) => AsyncIterable<SequencedEvent>,
  opts: { view: LogView; keepAliveMs: number; logger: Logger; headers?: Record<string, string> },
): Response {
  const gone = new AbortController();
  let keepAlive: NodeJS.Timeout | undefined;
  const stream = new ReadableStream<Uint8Array>({
    async start(controller) {
      const send = (text: string) => {
        if (!gone.signal.aborted) controller.enqueue(encoder.encode(text));
      };
      keepAlive = setInterval(() => send(": keep-alive\n\n"), opts.keepAliveMs);
      try {
        for await (const entry of open(gone.signal)) {
          send(sseFrame(entry, opts.view));
          if (entry.event.type === "completion") break;
        }
      } catch (err) {
        opts.logger.error("event stream failed", { error: String(err) });
        send(`event: completion\ndata: ${JSON.stringify(streamFailure(err))}\n\n`);
      } finally {
        clearInterval(keepAlive);
        if (!gone.signal.aborted) controller.close();
      }
    },
    cancel() {
      clearInterval(keepAlive);
      gone.abort();
    },
  });
  return new Response(stream, { status: 200, headers: { ...SSE_HEADERS, ...opts.headers } });
}

const streamFailure = (err: unknown) =>
  bareCompletion(
    "failed",
    `the event stream failed: ${err instanceof Error ? err.message : String(err)}; reconnect with Last-Event-ID to resume`,
  );
