import { OpenAPIHono } from "@hono/zod-openapi";
import type { AppEnv } from "./context.js";
import { validationError } from "./errors.js";
import { refuseUnfitInput } from "./input.js";

/**
 * A router whose validation failures become one problem+json listing every issue, and whose
 * validated input (every body, query, path and header a route declares) is fit to handle: no
 * U+0000, no lone surrogate, nothing nested past the bound (./input.ts).
 */
export function createRouter() {
  return new OpenAPIHono<AppEnv>({
    strict: false,
    defaultHook: (result) => {
      if (!result.success) throw validationError(result.target, result.error);
      refuseUnfitInput(result.target, result.data);
    },
  });
}
