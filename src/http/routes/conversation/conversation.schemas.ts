import { z } from "@hono/zod-openapi";
import { ConversationItem } from "../../../wire/conversation.js";

export const ConversationPage = z
  .object({
    data: z.array(ConversationItem),
    next_cursor: z.string().nullable().openapi({
      description:
        "null on the last page. A position after the page's last item: a `live` item before it may still grow (text) or get its outcome; to see it as it is later, read its page again.",
    }),
  })
  .openapi("ConversationPage");
