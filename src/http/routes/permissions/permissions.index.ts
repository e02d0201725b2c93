import { createRouter } from "../../router.js";
import * as handlers from "./permissions.handlers.js";
import * as routes from "./permissions.routes.js";

export const permissionsRouter = createRouter()
  .openapi(routes.listPermissions, handlers.listPermissions)
  .openapi(routes.answerPermission, handlers.answerPermission);
