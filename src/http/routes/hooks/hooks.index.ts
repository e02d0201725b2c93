import { createRouter } from "../../router.js";
import * as handlers from "./hooks.handlers.js";
import * as routes from "./hooks.routes.js";

export const hooksRouter = createRouter()
  .openapi(routes.createHook, handlers.createHook)
  .openapi(routes.listHooks, handlers.listHooks)
  .openapi(routes.getHook, handlers.getHook)
  .openapi(routes.updateHook, handlers.updateHook)
  .openapi(routes.deleteHook, handlers.deleteHook)
  .openapi(routes.listHookDeliveries, handlers.listHookDeliveries)
  .openapi(routes.deliverHook, handlers.deliverHook);
