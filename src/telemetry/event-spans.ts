import { type Attributes, type Context, type Span, type Tracer, trace } from "@opentelemetry/api";
import type { BridgeEvent, CompletionEvent } from "../events.js";
import type { RunExchange } from "./tracing.js";

// Spans per event (AGENT_BRIDGE_TRACE_EVENTS), after the Kandev seed's hierarchy: each turn of a
// run (a turn ends at the CLI's `result` line; a steered run has several) is a `prompt` span under
// the run's span, with a child per event in the order the CLI wrote them: `system`, `message`,
// `reasoning`, `tool_call`, `tool_update`, `context_window`, each `control_request <subtype>` and
// `control_response <subtype>` either way, the bridge's `input`, and the `completion`. Each child
// carries the raw line and the normalized event, each cut to EVENT_ATTRIBUTE_BYTES with a flag
// saying so, and never a secret of the run's (its credentials, its token) in either.
//
// A streamed message is one `message` span with its chunk count, not a span per `text_delta`: a
// run streams thousands of deltas (the bench relays 100 000), and a span each would fill the batch
// processor's queue (2048 by default; it drops what does not fit) with deltas and drop the spans
// that matter, as well as cost the collector a span per token. Memory stays bounded: one message
// span open at most, its text kept up to the cap; the rest is the SDK's bounded queue.

/** Longest raw line, or normalized event, a span carries (bytes of UTF-8). */
export const EVENT_ATTRIBUTE_BYTES = 8 * 1024;

const ATTR = {
  turn: "agent_bridge.turn",
  turnEvents: "agent_bridge.turn.events",
  index: "agent_bridge.event.index",
  type: "agent_bridge.event.type",
  direction: "agent_bridge.event.direction",
  raw: "agent_bridge.event.raw",
  rawTruncated: "agent_bridge.event.raw_truncated",
  normalized: "agent_bridge.event.normalized",
  normalizedTruncated: "agent_bridge.event.normalized_truncated",
  chunks: "agent_bridge.message.chunks",
  controlSubtype: "agent_bridge.control.subtype",
  controlRequestId: "agent_bridge.control.request_id",
} as const;

const REDACTED = "[redacted]";

/** Span names of events whose type is not their name. */
const NAMES: Partial<Record<BridgeEvent["type"], string>> = {
  text_delta: "message",
  subagent_text_delta: "message",
};

/** Lines that made no event and are left out: the partial-message frames around the deltas. */
const SILENT_LINES = new Set(["stream_event"]);

/** Control requests not answered yet (by request_id), to name their answers; bounded. */
const MAX_PENDING = 256;

type Chunk = Extract<BridgeEvent, { type: "text_delta" } | { type: "subagent_text_delta" }>;

interface Turn {
  span: Span;
  context: Context;
  events: number;
}

interface Message {
  span: Span;
  type: Chunk["type"];
  chunks: number;
  /** The text so far, kept up to the cap. */
  text: string;
  /** The last line of it: a chunk's, or the whole message's once the CLI writes it. */
  raw: string;
}

export function startEventSpans(tracer: Tracer, runContext: Context): RunExchange {
  let secrets: string[] = [];
  /** Characters beyond the cap kept before redacting, so that no secret is cut in two. */
  let margin = 0;
  let turns = 0;
  let turn: Turn | undefined;
  let message: Message | undefined;
  let done = false;
  const pending = new Map<string, string>();

  const redact = (text: string) => {
    let out = text;
    for (const secret of secrets) if (out.includes(secret)) out = out.split(secret).join(REDACTED);
    return out;
  };

  /** `text` without secrets, cut to the cap: the attribute and its truncated flag. */
  const capped = (key: string, flag: string, text: string): Attributes => {
    const sliced = text.length > EVENT_ATTRIBUTE_BYTES + margin;
    const window = redact(sliced ? text.slice(0, EVENT_ATTRIBUTE_BYTES + margin) : text);
    if (!sliced && Buffer.byteLength(window) <= EVENT_ATTRIBUTE_BYTES) {
      return { [key]: window, [flag]: false };
    }
    let cut = Buffer.from(window.slice(0, EVENT_ATTRIBUTE_BYTES))
      .subarray(0, EVENT_ATTRIBUTE_BYTES)
      .toString("utf8");
    // A character cut in two decodes as U+FFFD.
    if (cut.endsWith("\uFFFD")) cut = cut.slice(0, -1);
    return { [key]: cut, [flag]: true };
  };
  const rawAttributes = (raw: string) => capped(ATTR.raw, ATTR.rawTruncated, raw);
  const normalizedAttributes = (event: unknown) =>
    capped(ATTR.normalized, ATTR.normalizedTruncated, JSON.stringify(event));

  const currentTurn = (): Turn => {
    if (turn) return turn;
    turns++;
    const span = tracer.startSpan("prompt", { attributes: { [ATTR.turn]: turns } }, runContext);
    turn = { span, context: trace.setSpan(runContext, span), events: 0 };
    return turn;
  };

  const child = (name: string, attributes: Attributes): Span => {
    const t = currentTurn();
    t.events++;
    return tracer.startSpan(
      name,
      { attributes: { [ATTR.index]: t.events, ...attributes } },
      t.context,
    );
  };
  const point = (name: string, attributes: Attributes) => child(name, attributes).end();

  const closeMessage = () => {
    if (!message) return;
    const { span, type, chunks, text, raw } = message;
    message = undefined;
    span.setAttributes({
      [ATTR.chunks]: chunks,
      ...rawAttributes(raw),
      ...normalizedAttributes({ type, text }),
    });
    span.end();
  };

  const chunk = (event: Chunk, raw: string) => {
    if (message && message.type !== event.type) closeMessage();
    if (!message) {
      const span = child(NAMES[event.type] ?? event.type, {
        [ATTR.type]: event.type,
        [ATTR.direction]: "from_cli",
      });
      message = { span, type: event.type, chunks: 0, text: "", raw };
    }
    message.chunks++;
    message.raw = raw;
    if (message.text.length <= EVENT_ATTRIBUTE_BYTES + margin) message.text += event.text;
  };

  const endTurn = () => {
    closeMessage();
    if (!turn) return;
    turn.span.setAttribute(ATTR.turnEvents, turn.events);
    turn.span.end();
    turn = undefined;
  };

  const remember = (requestId: unknown, subtype: string) => {
    if (typeof requestId !== "string") return;
    if (pending.size >= MAX_PENDING) pending.clear();
    pending.set(requestId, subtype);
  };

  /** The span of a control message (either way) or of a line that made no event. */
  const control = (line: Record<string, unknown>, raw: string, direction: string) => {
    const type = typeof line.type === "string" ? line.type : "unknown";
    const attributes: Attributes = {
      [ATTR.type]: type,
      [ATTR.direction]: direction,
      ...rawAttributes(raw),
    };
    let name = type;
    if (type === "control_request") {
      const request = record(line.request);
      const subtype = typeof request?.subtype === "string" ? request.subtype : "unknown";
      remember(line.request_id, subtype);
      name = `control_request ${subtype}`;
      attributes[ATTR.controlSubtype] = subtype;
      if (typeof line.request_id === "string") attributes[ATTR.controlRequestId] = line.request_id;
    } else if (type === "control_response") {
      const response = record(line.response);
      const id = response?.request_id;
      const subtype = typeof id === "string" ? pending.get(id) : undefined;
      if (typeof id === "string") {
        pending.delete(id);
        attributes[ATTR.controlRequestId] = id;
      }
      name = `control_response ${subtype ?? "unknown"}`;
      if (subtype) attributes[ATTR.controlSubtype] = subtype;
    } else if (type === "result") {
      name = "completion";
    } else if (typeof line.subtype === "string" && type !== "system") {
      name = `${type} ${line.subtype}`;
    }
    point(name, attributes);
  };

  return {
    started(values) {
      // Short values are no credentials, and would redact half of every line.
      const long = values.filter((v) => v.length >= 8);
      secrets = [...new Set([...long, ...long.map((v) => JSON.stringify(v).slice(1, -1))])].sort(
        (a, b) => b.length - a.length,
      );
      margin = secrets[0]?.length ?? 0;
    },

    line(raw, line, events) {
      if (done) return;
      const type = line.type;
      if (events.length === 0) {
        if (message && type === "assistant") {
          // The streamed message, whole.
          message.raw = raw;
          closeMessage();
        } else if (typeof type !== "string" || !SILENT_LINES.has(type)) {
          closeMessage();
          control(line, raw, "from_cli");
        }
        if (type === "result") endTurn();
        return;
      }
      let rawAttrs: Attributes | undefined;
      for (const event of events) {
        if (event.type === "text_delta" || event.type === "subagent_text_delta") {
          chunk(event, raw);
          continue;
        }
        if (message && type === "assistant") message.raw = raw;
        closeMessage();
        rawAttrs ??= rawAttributes(raw);
        const name = type === "system" ? "system" : (NAMES[event.type] ?? event.type);
        point(name, {
          [ATTR.type]: event.type,
          [ATTR.direction]: "from_cli",
          ...rawAttrs,
          ...normalizedAttributes(event),
        });
      }
      const completed = events.some((e) => e.type === "completion");
      // A steered run's turn but the last: its result makes no completion of the run's.
      if (type === "result" && !completed) {
        closeMessage();
        control(line, raw, "from_cli");
      }
      if (type === "result" || completed) endTurn();
    },

    wrote(text) {
      if (done) return;
      for (const raw of text.split("\n")) {
        if (raw.trim() === "") continue;
        let line: Record<string, unknown> | undefined;
        try {
          line = record(JSON.parse(raw));
        } catch {
          // A CLI that reads plain text (codex's prompt).
        }
        closeMessage();
        const type = line?.type;
        if (line && (type === "control_request" || type === "control_response")) {
          control(line, raw, "to_cli");
        } else {
          point("input", {
            [ATTR.type]: typeof type === "string" ? type : "input",
            [ATTR.direction]: "to_cli",
            ...rawAttributes(raw),
          });
        }
      }
    },

    ended(completion: CompletionEvent) {
      if (done) return;
      done = true;
      // A run that ended without the CLI's result (a timeout, a crash, a cancel): the bridge's.
      if (turn) {
        closeMessage();
        point("completion", {
          [ATTR.type]: "completion",
          [ATTR.direction]: "bridge",
          ...normalizedAttributes(completion),
        });
      }
      endTurn();
      pending.clear();
    },
  };
}

function record(value: unknown): Record<string, unknown> | undefined {
  return typeof value === "object" && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : undefined;
}
