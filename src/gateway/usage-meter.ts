import { createParser, type EventSourceParser } from "eventsource-parser";
import { type CallUsage, noUsage, type UsageMeter } from "./api.js";

// A call's usage read from its answer as it passes, for any model API whose answers are JSON: a
// stream of server-sent events, or one whole JSON body (a non-streamed answer, and every error
// answer). What the events and the body say is the API's own (./messages-usage.ts,
// ./responses-usage.ts); the reading, bounded and never holding the bytes up, is this.

/** Largest whole body (or stream event) read for its usage: the APIs' own request bound. */
const MAX_READ_BYTES = 32 * 1024 * 1024;

export type Json = Record<string, unknown>;

/** How one API reports a call's usage, read into `usage` (which starts as `noUsage()`). */
export interface UsageReading {
  /**
   * The stream's events worth parsing, by name: the rest (the deltas, nearly all of a stream's
   * bytes) are passed over unparsed.
   */
  readonly events: ReadonlySet<string>;
  /** One of those events, its data parsed (undefined when it is not a JSON object). */
  event(name: string, data: Json | undefined, usage: CallUsage): void;
  /** A whole body, parsed (undefined when it is not a JSON object). */
  body(body: Json | undefined, usage: CallUsage): void;
}

export function parseObject(text: string): Json | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === "object" && value !== null ? (value as Json) : undefined;
  } catch {
    return undefined;
  }
}

/** `value[key]` when both are objects. */
export const objectAt = (value: unknown, key: string): Json | undefined => {
  const inner = typeof value === "object" && value !== null ? (value as Json)[key] : undefined;
  return typeof inner === "object" && inner !== null ? (inner as Json) : undefined;
};

/** `value[key]` when it is a finite number. */
export const countAt = (value: Json | undefined, key: string): number | undefined => {
  const count = value?.[key];
  return typeof count === "number" && Number.isFinite(count) ? count : undefined;
};

export class ResponseMeter implements UsageMeter {
  private readonly state: CallUsage = noUsage();
  private readonly stream: { parser: EventSourceParser; decoder: TextDecoder } | undefined;
  /** A whole body's bytes, until it has ended; undefined past MAX_READ_BYTES. */
  private body: Buffer[] | undefined = [];
  private bodyBytes = 0;

  constructor(
    contentType: string | undefined,
    private readonly reading: UsageReading,
  ) {
    if (contentType?.toLowerCase().startsWith("text/event-stream")) {
      this.stream = {
        decoder: new TextDecoder(),
        parser: createParser({
          maxBufferSize: MAX_READ_BYTES,
          onEvent: ({ event, data }) => {
            if (event !== undefined && reading.events.has(event)) {
              reading.event(event, parseObject(data), this.state);
            }
          },
        }),
      };
    }
  }

  push(chunk: Buffer): void {
    if (this.stream) {
      // A parser past its bound throws from then on: the usage read so far stays.
      try {
        this.stream.parser.feed(this.stream.decoder.decode(chunk, { stream: true }));
      } catch {}
      return;
    }
    if (!this.body) return;
    this.bodyBytes += chunk.length;
    if (this.bodyBytes > MAX_READ_BYTES) this.body = undefined;
    else this.body.push(chunk);
  }

  get whole(): boolean {
    return this.stream === undefined;
  }

  get ended(): boolean {
    return this.stream !== undefined && this.state.complete;
  }

  usage(): CallUsage {
    if (!this.stream && this.body) {
      this.reading.body(parseObject(Buffer.concat(this.body).toString("utf8")), this.state);
      this.body = undefined;
    }
    return { ...this.state };
  }
}
