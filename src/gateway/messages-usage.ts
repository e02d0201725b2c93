import { createParser, type EventSourceParser } from "eventsource-parser";
import { type CallUsage, noUsage, type UsageMeter } from "./api.js";

// The usage of an Anthropic Messages API response, read as it passes. A stream reports it in two
// events: `message_start` (the model, input and cache tokens, a first output count) and
// `message_delta` (output tokens, and any other count that changed; every count there is the
// call's running total, so a later one replaces an earlier one); an `error` event names what broke
// it off. A whole body (`stream: false`, and every error answer) has `usage` or `error` at its top.
// Only those events are parsed: the deltas, nearly all of a stream's bytes, are passed over.

/** Largest whole body (or stream event) read for its usage: the API's own request bound. */
const MAX_READ_BYTES = 32 * 1024 * 1024;

type Json = Record<string, unknown>;

const USAGE_FIELDS = {
  input_tokens: "inputTokens",
  output_tokens: "outputTokens",
  cache_read_input_tokens: "cacheReadTokens",
  cache_creation_input_tokens: "cacheCreationTokens",
} as const;

function parse(text: string): Json | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === "object" && value !== null ? (value as Json) : undefined;
  } catch {
    return undefined;
  }
}

const objectAt = (value: unknown, key: string): Json | undefined => {
  const inner = typeof value === "object" && value !== null ? (value as Json)[key] : undefined;
  return typeof inner === "object" && inner !== null ? (inner as Json) : undefined;
};

export class MessagesUsageMeter implements UsageMeter {
  private readonly state: CallUsage = noUsage();
  private readonly stream: { parser: EventSourceParser; decoder: TextDecoder } | undefined;
  /** A whole body's bytes, until it has ended; undefined past MAX_READ_BYTES. */
  private body: Buffer[] | undefined = [];
  private bodyBytes = 0;

  constructor(contentType: string | undefined) {
    if (contentType?.toLowerCase().startsWith("text/event-stream")) {
      this.stream = {
        decoder: new TextDecoder(),
        parser: createParser({
          maxBufferSize: MAX_READ_BYTES,
          onEvent: (event) => this.onEvent(event.event, event.data),
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

  usage(): CallUsage {
    if (!this.stream && this.body) {
      const message = parse(Buffer.concat(this.body).toString("utf8"));
      this.body = undefined;
      if (message?.type === "message") {
        this.readMessage(message);
        this.state.complete = true;
      } else if (message?.type === "error") {
        this.readError(message);
      }
    }
    return { ...this.state };
  }

  private onEvent(name: string | undefined, data: string): void {
    if (name === "message_start") {
      const message = objectAt(parse(data), "message");
      if (message) this.readMessage(message);
    } else if (name === "message_delta") {
      this.readUsage(objectAt(parse(data), "usage"));
    } else if (name === "message_stop") {
      this.state.complete = true;
    } else if (name === "error") {
      this.readError(parse(data));
    }
  }

  private readMessage(message: Json): void {
    if (typeof message.model === "string") this.state.model = message.model;
    this.readUsage(objectAt(message, "usage"));
  }

  private readUsage(usage: Json | undefined): void {
    if (!usage) return;
    for (const [field, key] of Object.entries(USAGE_FIELDS)) {
      const value = usage[field];
      if (typeof value === "number" && Number.isFinite(value)) this.state[key] = value;
    }
  }

  private readError(body: Json | undefined): void {
    const type = objectAt(body, "error")?.type;
    if (typeof type === "string") this.state.errorType = type;
  }
}
