import { OpenAPIHono } from "@hono/zod-openapi";
import type { AppEnv } from "./context.js";
import { validationError } from "./errors.js";

/** A router whose validation failures become one problem+json listing every issue. */
export function createRouter() {
  return new OpenAPIHono<AppEnv>({
    strict: false,
    defaultHook: (result) => {
      if (!result.success) throw validationError(result.target, result.error);
    },
  });
}
