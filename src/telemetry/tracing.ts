import { type Context, trace } from "@opentelemetry/api";
import type { MiddlewareHandler } from "hono";
import type { BridgeEvent, CompletionEvent } from "../events.js";

// What the rest of the bridge sees of OpenTelemetry tracing. Only the API package is imported
// here, and it is a no-op until an SDK registers: the SDK (otel.ts) is loaded, and anything of it
// started, only when an OTLP endpoint is configured (start-tracing.ts), so a server without one
// pays nothing.

/** A run about to start, as its span describes it. */
export interface RunSpanStart {
  runId: string;
  sessionId: string;
  /** The session's agent (`claude`, `codex`). */
  agent: string;
  /** The run's model (its message's, else its session's); null when the CLI picks its default. */
  model: string | null;
  trigger: string;
  /** The context the run was submitted in: the span of the HTTP request, when there was one. */
  parent: Context | undefined;
}

/** A run's span (`invoke_agent`), made from the run's events as they pass. */
export interface RunTrace {
  readonly traceId: string;
  /** Sees one of the run's events: tool calls become child spans; the completion ends it all. */
  observe(event: BridgeEvent): void;
  /** Calls `fn` with the run's span active, so that what it logs carries the span's ids. */
  within<T>(fn: () => T): T;
  /** Set when spans per event are on (AGENT_BRIDGE_TRACE_EVENTS): the driver's hook. */
  readonly exchange?: RunExchange;
}

/**
 * What passes between the bridge and a run's CLI, as the process driver sees it (the one place
 * every back-end's lines pass): each turn becomes a `prompt` span, each event of it a child.
 */
export interface RunExchange {
  /** The CLI runs; `secrets` (its credentials, the run's token) are never written into a span. */
  started(secrets: readonly string[]): void;
  /** A stdout line of the CLI: as framed, parsed, and the events its back-end made of it. */
  line(raw: string, line: Record<string, unknown>, events: readonly BridgeEvent[]): void;
  /** Text the bridge wrote to the CLI's stdin: its input, control requests and answers. */
  wrote(text: string): void;
  /** The run's completion, however it ended: a turn still open ends with it. */
  ended(completion: CompletionEvent): void;
}

export interface Tracing {
  /** The middleware that makes each request's server span; absent when tracing is off. */
  readonly http: MiddlewareHandler | undefined;
  /** Starts a run's span; undefined when tracing is off. */
  startRun(run: RunSpanStart): RunTrace | undefined;
  /** Sends the spans not sent yet, waiting at most `boundMs`, and stops. Never rejects. */
  shutdown(boundMs: number): Promise<void>;
}

export const tracingOff: Tracing = {
  http: undefined,
  startRun: () => undefined,
  shutdown: async () => {},
};

/**
 * Its configuration section: set, runs' spans go to this OTLP/HTTP traces endpoint; `events`, each
 * turn's events get spans of their own too.
 */
export type TracingConfig = { url: string; events: boolean } | undefined;

/** The active span's ids, as fields of a log line written inside it. */
export function activeTraceFields(): Record<string, string> | undefined {
  const span = trace.getActiveSpan()?.spanContext();
  return span && { trace_id: span.traceId, span_id: span.spanId };
}
