import { context, propagation, trace } from "@opentelemetry/api";
import { loggingErrorHandler, setGlobalErrorHandler } from "@opentelemetry/core";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import {
  defaultResource,
  detectResources,
  envDetector,
  resourceFromAttributes,
} from "@opentelemetry/resources";
import { BatchSpanProcessor, NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { ATTR_SERVICE_NAME } from "@opentelemetry/semantic-conventions";
import { errorText, type Logger } from "../log.js";
import { httpSpans } from "./http-spans.js";
import { startRunTrace } from "./run-spans.js";
import type { Tracing, TracingConfig } from "./tracing.js";

// The OpenTelemetry SDK, loaded only when tracing is on (see tracing.ts): spans are batched and
// sent as OTLP/HTTP JSON. The exporter reads its other settings (OTEL_EXPORTER_OTLP_HEADERS,
// _TIMEOUT, _COMPRESSION) and the resource its own (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES)
// from the environment, as in every OpenTelemetry SDK.

export function startOtel({ url, events }: NonNullable<TracingConfig>, logger: Logger): Tracing {
  // An unreachable collector must cost the operator one line, not one per batch, nor the server.
  let failures = 0;
  setGlobalErrorHandler((err) => {
    failures++;
    const fields = { endpoint: url, error: errorText(err) };
    if (failures === 1) logger.error("could not export spans (later failures: debug)", fields);
    else logger.debug("could not export spans", { ...fields, failures });
  });
  const provider = new NodeTracerProvider({
    resource: defaultResource()
      .merge(resourceFromAttributes({ [ATTR_SERVICE_NAME]: "agent-bridge" }))
      .merge(detectResources({ detectors: [envDetector] })),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url }))],
  });
  // The global context manager (AsyncLocalStorage) carries the active span through awaits.
  provider.register();
  const tracer = provider.getTracer("agent-bridge");
  logger.info("tracing on", { endpoint: url, ...(events ? { events: true } : {}) });
  return {
    http: httpSpans(tracer),
    startRun: (run) => startRunTrace(tracer, run, events),
    async shutdown(boundMs) {
      const flushed = provider
        .shutdown()
        .catch((err) =>
          logger.warn("could not send the last spans", { endpoint: url, error: errorText(err) }),
        );
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        flushed,
        new Promise((resolve) => (timer = setTimeout(resolve, boundMs))),
      ]);
      clearTimeout(timer);
      trace.disable();
      context.disable();
      propagation.disable();
      setGlobalErrorHandler(loggingErrorHandler());
    },
  };
}
