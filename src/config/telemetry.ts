import path from "node:path";
import { z } from "zod";
import { bool, httpUrl } from "../env-fields.js";
import type { TracingConfig } from "../telemetry/tracing.js";

// Traces, and the debug capture of runs' raw output.

export const telemetryEnv = {
  AGENT_BRIDGE_DEBUG_CAPTURE: z.string().min(1).optional(),
  // OpenTelemetry's own variables: these decide whether traces are on; the exporter reads the
  // rest of its settings (OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, …) itself, as every SDK does.
  OTEL_EXPORTER_OTLP_ENDPOINT: httpUrl.optional(),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: httpUrl.optional(),
  OTEL_SDK_DISABLED: bool.optional(),
  // A span per event of each turn, with the raw line and the event (telemetry/event-spans.ts).
  AGENT_BRIDGE_TRACE_EVENTS: bool.optional(),
};

export interface TelemetryConfig {
  /** Set: runs' spans go to this OTLP/HTTP traces endpoint (src/telemetry/). */
  tracing: TracingConfig;
  /** Set: each run's raw CLI output and events are written here as JSONL (debugging only). */
  debugCaptureDir: string | undefined;
}

export function telemetrySection(e: z.infer<z.ZodObject<typeof telemetryEnv>>): TelemetryConfig {
  return {
    tracing: tracesUrl(e),
    debugCaptureDir: e.AGENT_BRIDGE_DEBUG_CAPTURE && path.resolve(e.AGENT_BRIDGE_DEBUG_CAPTURE),
  };
}

/**
 * Where spans go, as the OTLP exporter specification says: the traces endpoint as given, else
 * the general endpoint with `v1/traces` added; none (tracing off) when neither is set.
 */
function tracesUrl(e: z.infer<z.ZodObject<typeof telemetryEnv>>): TracingConfig {
  if (e.OTEL_SDK_DISABLED) return undefined;
  const events = e.AGENT_BRIDGE_TRACE_EVENTS ?? false;
  if (e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) {
    return { url: e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, events };
  }
  const base = e.OTEL_EXPORTER_OTLP_ENDPOINT;
  if (!base) return undefined;
  return { url: `${base}${base.endsWith("/") ? "" : "/"}v1/traces`, events };
}
