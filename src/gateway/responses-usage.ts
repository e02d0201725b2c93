import type { CallUsage } from "./api.js";
import { countAt, type Json, objectAt, type UsageReading } from "./usage-meter.js";

// The usage of an OpenAI Responses API response. A stream names its model in `response.created`
// and reports the call's usage once, in the response its last event carries:
// `response.completed`, `response.incomplete` (an answer cut short by its own limits, which is
// still the whole answer) or `response.failed` (with the error that ended it); an `error` event
// names what broke a stream off. A whole body (`stream: false`) is the response itself; an error
// answer has `error` at its top. The API counts cached input among the input tokens; the
// gateway's record, as the bridge's usage everywhere, keeps them apart.

function readResponse(response: Json | undefined, usage: CallUsage): void {
  if (typeof response?.model === "string") usage.model = response.model;
  const reported = objectAt(response, "usage");
  if (!reported) return;
  const input = countAt(reported, "input_tokens") ?? 0;
  const cached = countAt(objectAt(reported, "input_tokens_details"), "cached_tokens") ?? 0;
  usage.inputTokens = Math.max(0, input - cached);
  usage.cacheReadTokens = cached;
  usage.outputTokens = countAt(reported, "output_tokens") ?? 0;
}

/** The response's outcome: complete, or failed with the error it names. */
function readOutcome(response: Json | undefined, usage: CallUsage): void {
  if (response?.status === "failed") {
    const code = objectAt(response, "error")?.code;
    usage.errorType = typeof code === "string" ? code : "response_failed";
  } else {
    usage.complete = true;
  }
}

export const responsesUsage: UsageReading = {
  events: new Set([
    "response.created",
    "response.completed",
    "response.incomplete",
    "response.failed",
    "error",
  ]),
  event(name, data, usage) {
    if (name === "error") {
      const code = data?.code;
      usage.errorType = typeof code === "string" ? code : "error";
      return;
    }
    const response = objectAt(data, "response");
    readResponse(response, usage);
    if (name !== "response.created") readOutcome(response, usage);
  },
  body(body, usage) {
    if (body?.object === "response") {
      readResponse(body, usage);
      readOutcome(body, usage);
      return;
    }
    // An error's code is the more exact (`rate_limit_exceeded` where its type is `requests`);
    // some have a type alone.
    const error = objectAt(body, "error");
    const type = error?.code ?? error?.type;
    if (typeof type === "string") usage.errorType = type;
  },
};
