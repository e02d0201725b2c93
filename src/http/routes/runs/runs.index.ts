import { createRouter } from "../../router.js";
import * as handlers from "./runs.handlers.js";
import * as routes from "./runs.routes.js";

export const runsRouter = createRouter()
  .openapi(routes.postMessage, handlers.postMessage)
  .openapi(routes.listRuns, handlers.listRuns)
  .openapi(routes.listSessionRuns, handlers.listSessionRuns)
  .openapi(routes.getRun, handlers.getRun)
  .openapi(routes.getRunEvents, handlers.getRunEvents)
  .openapi(routes.cancelRun, handlers.cancelRun)
  .openapi(routes.interruptRun, handlers.interruptRun)
  .openapi(routes.retryRun, handlers.retryRun)
  .openapi(routes.createStreamToken, handlers.createStreamToken);
