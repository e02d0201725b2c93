import type { MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { routePath } from "hono/route";
import { DomainError } from "../errors.js";
import type { AppEnv } from "./context.js";

/** Bodies beyond `maxBytes` are refused before they are read whole. */
export const limitBody = (maxBytes: number): MiddlewareHandler<AppEnv> =>
  bodyLimit({
    maxSize: maxBytes,
    onError: () => {
      throw new DomainError(
        "payload_too_large",
        `request body exceeds the limit of ${maxBytes} bytes`,
      );
    },
  });

const JSON_MEDIA_TYPE = /^application\/([\w.-]+\+)?json$/i;

/**
 * A request that carries a body must say it is JSON. Without this, the validator would treat a
 * form or text body as an empty object and a POST could succeed on input it never read.
 */
export const requireJsonBody: MiddlewareHandler<AppEnv> = async (c, next) => {
  if (c.req.method === "GET" || c.req.method === "HEAD" || c.req.method === "DELETE") return next();
  const hasBody =
    c.req.header("transfer-encoding") !== undefined ||
    Number(c.req.header("content-length") ?? 0) > 0;
  const type = c.req.header("content-type");
  const mediaType = type?.split(";")[0]?.trim() ?? "";
  if ((hasBody || type !== undefined) && !JSON_MEDIA_TYPE.test(mediaType)) {
    throw new DomainError(
      "unsupported_media_type",
      `expected Content-Type: application/json, got ${type === undefined ? "none" : JSON.stringify(type)}`,
    );
  }
  await next();
};

/**
 * One line per request: method, path, status, time, request id and the key's name. Never a
 * header or a body, so no credential reaches the log.
 */
export const accessLog: MiddlewareHandler<AppEnv> = async (c, next) => {
  const started = performance.now();
  await next();
  c.var.logger.info("request", {
    method: c.req.method,
    path: c.req.path,
    status: c.res.status,
    ms: Math.round(performance.now() - started),
    request_id: c.var.requestId,
    key: c.var.principal?.name,
  });
};

/** Counts each request in the metrics, by the route pattern it matched (not its path). */
export const requestMetrics: MiddlewareHandler<AppEnv> = async (c, next) => {
  const started = performance.now();
  await next();
  const seconds = (performance.now() - started) / 1000;
  c.var.metrics.httpResponded(c.req.method, routePath(c, -1), c.res.status, seconds);
};
