import { createRouter } from "../../router.js";
import * as handlers from "./health.handlers.js";
import * as routes from "./health.routes.js";

export const healthRouter = createRouter()
  .openapi(routes.root, handlers.root)
  .openapi(routes.healthz, handlers.healthz)
  .openapi(routes.readyz, handlers.readyz)
  .openapi(routes.metrics, handlers.metrics);
