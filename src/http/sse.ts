import { z } from "@hono/zod-openapi";
import { errorFields, type Logger } from "../log.js";
import { type LogView, positionIn, type SequencedEvent } from "../store/events.js";

const encoder = new TextEncoder();
/** Frames of a batch are handed on in chunks of about this many characters. */
const FLUSH_CHARS = 64 * 1024;
/** How far the stream may run ahead of a slow client. */
const HIGH_WATER_BYTES = 256 * 1024;

/** One SSE frame: `id:` is the event's position in the view the client reads. */
export function sseFrame(entry: SequencedEvent, view: LogView): string {
  return `id: ${positionIn(view, entry)}\nevent: ${entry.type}\ndata: ${entry.json}\n\n`;
}

export const StreamError = z
  .object({
    code: z.enum(["stream_failed"]).openapi({ description: "Stable: switch on it." }),
    message: z.string(),
  })
  .openapi("StreamError", {
    description:
      "The `data:` of an `event: error` frame, which ends a stream the server could not continue (the run goes on). It has no `id:`: reconnect with `Last-Event-ID` set to the last event's id to get every later event, once. It is not a `completion`, and carries no detail of the cause (that is in the server's log).",
  });

/** The frame that ends a stream the server could not continue (named as Hono's helper does). */
export const STREAM_FAILED = `event: error\ndata: ${JSON.stringify({
  code: "stream_failed",
  message:
    "the event stream failed on the server; reconnect with Last-Event-ID to resume after the last event received",
} satisfies z.infer<typeof StreamError>)}\n\n`;

export const SSE_HEADERS = {
  "Content-Type": "text/event-stream; charset=utf-8",
  "Cache-Control": "no-cache, no-transform",
  // Tells nginx-style proxies not to buffer the stream.
  "X-Accel-Buffering": "no",
} as const;

/**
 * Streams a run's events as SSE until its completion, with a comment line every `keepAliveMs`
 * so that idle proxies keep the connection. A client that goes away only ends its subscription;
 * the run goes on. A failure after the response has started cannot become an HTTP error: it
 * ends the stream with an `error` frame (see STREAM_FAILED), never with a made-up `completion`,
 * which would break "exactly one completion" for a run that may still be going. The cause is
 * logged, not sent: it may hold SQL, parameters or server paths.
 *
 * The frames of a batch of events go out as one chunk, at once, and batches are read only while
 * the client keeps up (the stream's queue holds at most HIGH_WATER_BYTES): the bench found a
 * replay enqueueing 50 000 one-frame chunks at once, whose dequeueing (an array shift each) then
 * took most of the time, with the whole replay held in memory for a slow client.
 */
export function sseResponse(
  open: (signal: AbortSignal) => AsyncIterable<SequencedEvent[]>,
  opts: StreamOptions & { view: LogView },
): Response {
  return sseFramesResponse(async function* (signal) {
    for await (const batch of open(signal)) {
      const end = batch.findIndex((entry) => entry.type === "completion");
      const sent = end < 0 ? batch : batch.slice(0, end + 1);
      yield framesOf(sent, opts.view);
      if (end >= 0) return;
    }
  }, opts);
}

/**
 * A batch's frames, each made as it is sent: a batch may be thousands of events, and its frames
 * made all at once outlived the young generation's collections while they were sent, which moved
 * them into the old generation (docs/performance.md).
 */
function* framesOf(batch: SequencedEvent[], view: LogView): Iterable<string> {
  for (const entry of batch) yield sseFrame(entry, view);
}

export interface StreamOptions {
  keepAliveMs: number;
  logger: Logger;
  headers?: Record<string, string>;
  /** Called once when the stream ends, however it ends (its end, a failure, the client gone). */
  onClose?: () => void;
}

/**
 * An SSE stream of the frames `open` yields, batch after batch, until it ends (sseResponse says
 * what every stream here does: keep-alives, chunks, back-pressure, a failure's `error` frame).
 */
export function sseFramesResponse(
  open: (signal: AbortSignal) => AsyncIterable<Iterable<string>>,
  opts: StreamOptions,
): Response {
  const gone = new AbortController();
  let closed = false;
  const onClose = () => {
    if (closed) return;
    closed = true;
    opts.onClose?.();
  };
  let keepAlive: NodeJS.Timeout | undefined;
  /** Resolves the producer's wait for room in the queue. */
  let wake: (() => void) | undefined;
  const stream = new ReadableStream<Uint8Array>(
    {
      start(controller) {
        let pending = "";
        const flush = () => {
          if (pending && !gone.signal.aborted) controller.enqueue(encoder.encode(pending));
          pending = "";
        };
        const send = (text: string) => {
          pending += text;
          if (pending.length >= FLUSH_CHARS) flush();
        };
        const room = async () => {
          while (!gone.signal.aborted && (controller.desiredSize ?? 1) <= 0) {
            await new Promise<void>((resolve) => {
              wake = resolve;
            });
          }
        };
        keepAlive = setInterval(() => {
          send(": keep-alive\n\n");
          flush();
        }, opts.keepAliveMs);
        // Not awaited: `pull` (the client asking for more) is only called once `start` returns.
        void (async () => {
          try {
            for await (const frames of open(gone.signal)) {
              for (const frame of frames) send(frame);
              flush();
              await room();
              if (gone.signal.aborted) break;
            }
          } catch (err) {
            opts.logger.error("event stream failed", {
              ...errorFields(err),
            });
            send(STREAM_FAILED);
          } finally {
            clearInterval(keepAlive);
            flush();
            if (!gone.signal.aborted) controller.close();
            onClose();
          }
        })();
      },
      pull() {
        wake?.();
        wake = undefined;
      },
      cancel() {
        clearInterval(keepAlive);
        gone.abort();
        wake?.();
        onClose();
      },
    },
    { highWaterMark: HIGH_WATER_BYTES, size: (chunk) => chunk.byteLength },
  );
  return new Response(stream, { status: 200, headers: { ...SSE_HEADERS, ...opts.headers } });
}
