import { errorFields, type Logger } from "../log.js";
import { SSE_HEADERS, STREAM_FAILED } from "./sse.js";

// An SSE stream of frames made elsewhere (the live feed's: src/cluster/feed.ts), with what every
// stream here has (src/http/sse.ts): keep-alive comments, a batch of frames sent as one chunk,
// read only while the client keeps up, and a failure after the start ending it with an `error`
// frame (the cause logged, not sent).

const encoder = new TextEncoder();
/** How far the stream may run ahead of a slow client. */
const HIGH_WATER_BYTES = 256 * 1024;

export function sseFramesResponse(
  open: (signal: AbortSignal) => AsyncIterable<string[]>,
  opts: {
    keepAliveMs: number;
    logger: Logger;
    headers?: Record<string, string>;
    /** Called once when the stream ends, however it ends. */
    onClose?: () => void;
  },
): Response {
  const gone = new AbortController();
  let closed = false;
  const onClose = () => {
    if (closed) return;
    closed = true;
    opts.onClose?.();
  };
  let keepAlive: NodeJS.Timeout | undefined;
  let wake: (() => void) | undefined;
  const stream = new ReadableStream<Uint8Array>(
    {
      start(controller) {
        const send = (text: string) => {
          if (text && !gone.signal.aborted) controller.enqueue(encoder.encode(text));
        };
        const room = async () => {
          while (!gone.signal.aborted && (controller.desiredSize ?? 1) <= 0) {
            await new Promise<void>((resolve) => {
              wake = resolve;
            });
          }
        };
        keepAlive = setInterval(() => send(": keep-alive\n\n"), opts.keepAliveMs);
        void (async () => {
          try {
            for await (const frames of open(gone.signal)) {
              send(frames.join(""));
              await room();
              if (gone.signal.aborted) break;
            }
          } catch (err) {
            opts.logger.error("event stream failed", { ...errorFields(err) });
            send(STREAM_FAILED);
          } finally {
            clearInterval(keepAlive);
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
