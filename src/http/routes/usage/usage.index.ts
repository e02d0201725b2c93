import { createRouter } from "../../router.js";
import * as handlers from "./usage.handlers.js";
import * as routes from "./usage.routes.js";

export const usageRouter = createRouter().openapi(routes.getUsage, handlers.getUsage);
