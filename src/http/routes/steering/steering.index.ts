import { createRouter } from "../../router.js";
import * as handlers from "./steering.handlers.js";
import * as routes from "./steering.routes.js";

export const steeringRouter = createRouter()
  .openapi(routes.postRunInput, handlers.postRunInput)
  .openapi(routes.postRunControl, handlers.postRunControl);
