import type { CallUsage } from "./api.js";
import { countAt, type Json, objectAt, type UsageReading } from "./usage-meter.js";

// The usage of an Anthropic Messages API response. A stream reports it in two events:
// `message_start` (the model, input and cache tokens, a first output count) and `message_delta`
// (output tokens, and any other count that changed; every count there is the call's running
// total, so a later one replaces an earlier one); an `error` event names what broke it off. A
// whole body (`stream: false`, and every error answer) has `usage` or `error` at its top.

const USAGE_FIELDS = {
  input_tokens: "inputTokens",
  output_tokens: "outputTokens",
  cache_read_input_tokens: "cacheReadTokens",
  cache_creation_input_tokens: "cacheCreationTokens",
} as const;

function readMessage(message: Json, usage: CallUsage): void {
  if (typeof message.model === "string") usage.model = message.model;
  readUsage(objectAt(message, "usage"), usage);
}

function readUsage(reported: Json | undefined, usage: CallUsage): void {
  for (const [field, key] of Object.entries(USAGE_FIELDS)) {
    const count = countAt(reported, field);
    if (count !== undefined) usage[key] = count;
  }
}

function readError(body: Json | undefined, usage: CallUsage): void {
  const type = objectAt(body, "error")?.type;
  if (typeof type === "string") usage.errorType = type;
}

export const messagesUsage: UsageReading = {
  events: new Set(["message_start", "message_delta", "message_stop", "error"]),
  event(name, data, usage) {
    if (name === "message_start") {
      const message = objectAt(data, "message");
      if (message) readMessage(message, usage);
    } else if (name === "message_delta") {
      readUsage(objectAt(data, "usage"), usage);
    } else if (name === "message_stop") {
      usage.complete = true;
    } else {
      readError(data, usage);
    }
  },
  body(body, usage) {
    if (body?.type === "message") {
      readMessage(body, usage);
      usage.complete = true;
    } else if (body?.type === "error") {
      readError(body, usage);
    }
  },
};
