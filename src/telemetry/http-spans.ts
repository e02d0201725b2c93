import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from "@opentelemetry/api";
import {
  ATTR_ERROR_TYPE,
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_HTTP_ROUTE,
  ATTR_URL_PATH,
  ATTR_URL_SCHEME,
} from "@opentelemetry/semantic-conventions";
import type { MiddlewareHandler } from "hono";
import { routePath } from "hono/route";

/**
 * One server span per request, named by its route pattern (`POST /v1/sessions/:id/messages`), as
 * the metrics label it. The URL's path is recorded, never its query string nor a header: a stream
 * token rides in the query, a key in `Authorization` (@hono/otel records the whole URL, which is
 * why it is not used). A caller's `traceparent` makes the request part of the caller's trace.
 */
export function httpSpans(tracer: Tracer): MiddlewareHandler {
  return async (c, next) => {
    const parent = propagation.extract(ROOT_CONTEXT, c.req.header());
    const span = tracer.startSpan(
      c.req.method,
      {
        kind: SpanKind.SERVER,
        attributes: {
          [ATTR_HTTP_REQUEST_METHOD]: c.req.method,
          [ATTR_URL_PATH]: c.req.path,
          [ATTR_URL_SCHEME]: new URL(c.req.url).protocol.slice(0, -1),
        },
      },
      parent,
    );
    try {
      await context.with(trace.setSpan(parent, span), next);
    } finally {
      // Known once routing is done: the pattern of the handler that answered.
      const route = routePath(c, -1);
      const status = c.res.status;
      span.updateName(`${c.req.method} ${route}`);
      span.setAttributes({ [ATTR_HTTP_ROUTE]: route, [ATTR_HTTP_RESPONSE_STATUS_CODE]: status });
      if (status >= 500) {
        span.setAttribute(ATTR_ERROR_TYPE, String(status));
        span.setStatus({ code: SpanStatusCode.ERROR });
      }
      span.end();
    }
  };
}
