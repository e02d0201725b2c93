import type { Logger } from "../log.js";
import { type Tracing, type TracingConfig, tracingOff } from "./tracing.js";

// Loads the SDK (otel.ts) when tracing is configured: apart from tracing.ts, so that otel.ts,
// which implements tracing.ts's interfaces, does not import the module that loads it.

/** Tracing as configured: the SDK and its OTLP/HTTP exporter when an endpoint is set, else off. */
export async function startTracing(
  config: { tracing: TracingConfig },
  logger: Logger,
): Promise<Tracing> {
  if (!config.tracing) return tracingOff;
  const { startOtel } = await import("./otel.js");
  return startOtel(config.tracing, logger);
}
