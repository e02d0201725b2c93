import { createRouter } from "../../router.js";
import * as handlers from "./keys.handlers.js";
import * as routes from "./keys.routes.js";

export const keysRouter = createRouter()
  .openapi(routes.createKey, handlers.createKey)
  .openapi(routes.listKeys, handlers.listKeys)
  .openapi(routes.updateKey, handlers.updateKey)
  .openapi(routes.revokeKey, handlers.revokeKey);
