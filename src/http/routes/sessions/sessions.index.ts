import { refuseUnfitInput } from "../../input.js";
import { createRouter } from "../../router.js";
import * as forkHandlers from "./fork.handlers.js";
import * as forkRoutes from "./fork.routes.js";
import * as handlers from "./sessions.handlers.js";
import * as routes from "./sessions.routes.js";
import * as settingsHandlers from "./settings.handlers.js";
import * as settingsRoutes from "./settings.routes.js";
import { patchValidationError } from "./settings.schemas.js";

export const sessionsRouter = createRouter()
  .openapi(routes.createSession, handlers.createSession)
  .openapi(routes.listSessions, handlers.listSessions)
  .openapi(routes.getSession, handlers.getSession)
  .openapi(routes.deleteSession, handlers.deleteSession)
  .openapi(forkRoutes.forkSession, forkHandlers.forkSession)
  .openapi(settingsRoutes.updateSession, settingsHandlers.updateSession, (result) => {
    // Each field a patch may not name is refused by its name (settings.schemas.ts).
    if (!result.success) throw patchValidationError(result.target, result.error);
    refuseUnfitInput(result.target, result.data);
    return undefined;
  })
  .openapi(settingsRoutes.getSessionDiff, settingsHandlers.getSessionDiff);
