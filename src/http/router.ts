import { OpenAPIHono } from "@hono/zod-openapi";
import type { AppEnv } from "./context.js";
import { validationError } from "./errors.js";
import { refuseNul } from "./nul.js";

/**
 * A router whose validation failures become one problem+json listing every issue, and whose
 * validated input (every body, query, path and header a route declares) holds no U+0000.
 */
export function createRouter() {
  return new OpenAPIHono<AppEnv>({
    strict: false,
    defaultHook: (result) => {
      if (!result.success) throw validationError(result.target, result.error);
      refuseNul(result.target, result.data);
    },
  });
}
