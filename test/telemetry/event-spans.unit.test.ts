import { ROOT_CONTEXT, trace } from "@opentelemetry/api";
import {
  InMemorySpanExporter,
  NodeTracerProvider,
  type ReadableSpan,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-node";
import { describe, expect, it } from "vitest";
import { type BridgeEvent, bareCompletion } from "../../src/events.js";
import { EVENT_ATTRIBUTE_BYTES, startEventSpans } from "../../src/telemetry/event-spans.js";

// The exchange hook alone, fed the lines and events a driver would feed it, its spans kept in
// memory: turns of a steered run, a run that ends without its result, the cap and the redaction.

function traced() {
  const exporter = new InMemorySpanExporter();
  const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const tracer = provider.getTracer("test");
  const run = tracer.startSpan("run");
  const exchange = startEventSpans(tracer, trace.setSpan(ROOT_CONTEXT, run));
  const spans = () => exporter.getFinishedSpans();
  /** The prompt spans in turn order, each with its children in order. */
  const turns = () =>
    spans()
      .filter((s) => s.name === "prompt")
      .map((prompt) => ({
        prompt,
        children: spans()
          .filter((s) => s.parentSpanContext?.spanId === prompt.spanContext().spanId)
          .sort((a, b) => index(a) - index(b)),
      }));
  return { exchange, spans, turns, runId: run.spanContext().spanId };
}

const index = (s: ReadableSpan) => Number(s.attributes["agent_bridge.event.index"]);
const line = (value: Record<string, unknown>) => [JSON.stringify(value), value] as const;
const delta = (text: string): BridgeEvent => ({ type: "text_delta", text });
const completion = bareCompletion("succeeded", "");

describe("spans per event", () => {
  it("makes each turn of a steered run a prompt span, ending at each result line, the last with the run's completion", () => {
    const { exchange, turns, runId } = traced();
    exchange.started([]);
    exchange.wrote('{"type":"user","message":{"content":"first"}}\n');
    const streamed = line({ type: "stream_event", event: { type: "content_block_delta" } });
    exchange.line(...streamed, [delta("Hel")]);
    exchange.line(...streamed, [delta("lo")]);
    // A frame that made nothing leaves the message open.
    exchange.line(...line({ type: "stream_event", event: { type: "content_block_stop" } }), []);
    exchange.line(...line({ type: "assistant", message: { content: "Hello" } }), []);
    // Steering input, answered after this turn.
    exchange.wrote('{"type":"user","message":{"content":"second"}}\n');
    // The first turn's result makes no completion of the run's.
    exchange.line(...line({ type: "result", subtype: "success" }), []);
    exchange.line(...streamed, [delta("Again")]);
    exchange.line(...line({ type: "result", subtype: "success" }), [completion]);
    exchange.ended(completion);

    const [first, second, ...more] = turns();
    expect(more).toEqual([]);
    expect(first?.prompt.attributes["agent_bridge.turn"]).toBe(1);
    expect(second?.prompt.attributes["agent_bridge.turn"]).toBe(2);
    expect(first?.prompt.parentSpanContext?.spanId).toBe(runId);
    expect(first?.children.map((s) => s.name)).toEqual(["input", "message", "input", "completion"]);
    expect(second?.children.map((s) => s.name)).toEqual(["message", "completion"]);

    const message = first?.children[1];
    expect(message?.attributes).toMatchObject({
      "agent_bridge.message.chunks": 2,
      "agent_bridge.event.normalized": JSON.stringify({ type: "text_delta", text: "Hello" }),
      // The whole message's line, once the CLI wrote it.
      "agent_bridge.event.raw": JSON.stringify({
        type: "assistant",
        message: { content: "Hello" },
      }),
    });
    expect(first?.children[3]?.attributes).toMatchObject({
      "agent_bridge.event.type": "result",
      "agent_bridge.event.direction": "from_cli",
    });
    expect(first?.children[3]?.attributes["agent_bridge.event.normalized"]).toBeUndefined();
    expect(
      JSON.parse(String(second?.children[1]?.attributes["agent_bridge.event.normalized"])),
    ).toMatchObject({ type: "completion", status: "succeeded" });
  });

  it("names a control request of the bridge's and the CLI's answer to it by its subtype", () => {
    const { exchange, turns } = traced();
    exchange.started([]);
    exchange.wrote(
      '{"type":"control_request","request_id":"interrupt-1","request":{"subtype":"interrupt"}}\n',
    );
    exchange.line(
      ...line({
        type: "control_response",
        response: { subtype: "success", request_id: "interrupt-1" },
      }),
      [],
    );
    exchange.ended(bareCompletion("cancelled", "interrupted"));
    const [turn] = turns();
    expect(
      turn?.children.map((s) => [s.name, s.attributes["agent_bridge.event.direction"]]),
    ).toEqual([
      ["control_request interrupt", "to_cli"],
      ["control_response interrupt", "from_cli"],
      // No result line: the bridge's completion ends the turn.
      ["completion", "bridge"],
    ]);
    expect(turn?.children[1]?.attributes["agent_bridge.control.request_id"]).toBe("interrupt-1");
  });

  it("cuts a raw line and an event to the cap at a character's boundary, saying so, and redacts a credential across the cut, also as JSON escapes it", () => {
    const { exchange, turns } = traced();
    const secret = 'sk-run-token/with"quote';
    exchange.started([secret, "short"]);
    // Multi-byte characters up to just before the cap, then the credential across it.
    const text = `${"é".repeat(EVENT_ATTRIBUTE_BYTES / 2 - 20)}${secret}${"x".repeat(10_000)}`;
    const raw = line({ type: "user", content: text });
    exchange.line(...raw, [{ type: "reasoning", text: "short" }]);
    exchange.line(...line({ type: "note", text: `a ${secret} b short` }), []);
    exchange.ended(completion);

    const [turn] = turns();
    const update = turn?.children[0];
    expect(update?.name).toBe("reasoning");
    const cut = String(update?.attributes["agent_bridge.event.raw"]);
    expect(update?.attributes["agent_bridge.event.raw_truncated"]).toBe(true);
    expect(Buffer.byteLength(cut)).toBeLessThanOrEqual(EVENT_ATTRIBUTE_BYTES);
    expect(cut).not.toContain("\uFFFD");
    expect(cut).not.toContain("sk-run");
    expect(cut).toContain("[redacted]");
    expect(update?.attributes["agent_bridge.event.normalized_truncated"]).toBe(false);

    const note = turn?.children[1];
    expect(note?.name).toBe("note");
    expect(note?.attributes["agent_bridge.event.raw_truncated"]).toBe(false);
    // Values shorter than 8 characters are left: they would redact half of every line.
    expect(note?.attributes["agent_bridge.event.raw"]).toBe(
      JSON.stringify({ type: "note", text: "a [redacted] b short" }),
    );
  });

  it("makes nothing of what passes after the run's completion", () => {
    const { exchange, spans } = traced();
    exchange.started([]);
    exchange.line(...line({ type: "result" }), [completion]);
    exchange.ended(completion);
    const before = spans().length;
    exchange.wrote(
      '{"type":"control_request","request_id":"late","request":{"subtype":"interrupt"}}',
    );
    exchange.line(...line({ type: "system", subtype: "late" }), []);
    expect(spans().length).toBe(before);
  });
});
