import { createRouter } from "../../router.js";
import * as forkHandlers from "./fork.handlers.js";
import * as forkRoutes from "./fork.routes.js";
import * as handlers from "./sessions.handlers.js";
import * as routes from "./sessions.routes.js";

export const sessionsRouter = createRouter()
  .openapi(routes.createSession, handlers.createSession)
  .openapi(routes.listSessions, handlers.listSessions)
  .openapi(routes.getSession, handlers.getSession)
  .openapi(routes.deleteSession, handlers.deleteSession)
  .openapi(forkRoutes.forkSession, forkHandlers.forkSession);
