import { createRouter } from "../../router.js";
import * as handlers from "./feed.handlers.js";
import * as routes from "./feed.routes.js";

export const feedRouter = createRouter().openapi(routes.getFeed, handlers.getFeed);
