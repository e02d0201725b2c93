import { createRoute, z } from "@hono/zod-openapi";
import { PageQuery } from "../../cursor.js";
import { problemResponses } from "../../errors.js";
import { SessionId } from "../sessions/sessions.schemas.js";
import { ConversationPage } from "./conversation.schemas.js";

export const listSessionMessages = createRoute({
  method: "get",
  path: "/v1/sessions/{id}/messages",
  operationId: "listSessionMessages",
  tags: ["Sessions"],
  summary: "The session's conversation: its turns in order, across its runs",
  description: [
    "Items oldest first, each with its run's id and the `seq` of the run's event it comes from:",
    "per run, the user's message (`user_message`, with who sent it and its images named), then",
    "what its event log holds — the agent's text (`assistant_text`: its `text_delta` events",
    "joined between two other items), its tool calls with their outcome (`tool_call`), permission",
    "requests with their answer (`permission`), the user's input written into the live run",
    "(`user_input`) and its switches of model or mode (`control`), and how the run ended",
    "(`run_end`). Read from the",
    "stored runs and their logs; a run still going shows its items so far, marked `live`. Paged",
    "by item (`limit` items a page), the cursor a position (run, seq) in the conversation.",
  ].join(" "),
  request: { params: z.object({ id: SessionId }), query: PageQuery },
  responses: {
    200: {
      description: "One page of the conversation",
      content: { "application/json": { schema: ConversationPage } },
    },
    ...problemResponses(400, 401, 404, 429),
  },
});
