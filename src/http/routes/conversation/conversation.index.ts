import { createRouter } from "../../router.js";
import * as handlers from "./conversation.handlers.js";
import * as routes from "./conversation.routes.js";

export const conversationRouter = createRouter().openapi(
  routes.listSessionMessages,
  handlers.listSessionMessages,
);
