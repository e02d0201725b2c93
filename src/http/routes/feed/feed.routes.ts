import { createRoute, z } from "@hono/zod-openapi";
import { problemResponses } from "../../errors.js";
import { FeedHeaders, FeedQuery, FeedStream } from "./feed.schemas.js";

export const getFeed = createRoute({
  method: "get",
  path: "/v1/events",
  operationId: "getFeed",
  tags: ["Feed"],
  summary: "The live feed: runs queued, started and finished, permission requests, sessions",
  description: [
    "What happens to the caller's sessions (all sessions for an admin key), as SSE, on whichever",
    "instance it happens: `session_created`, `session_deleted`, `run_queued`, `run_started`,",
    "`run_finished` (status, error code, cost), `permission_requested` and",
    "`permission_resolved`. Each event is stored with what it reports, in the same transaction:",
    "nothing is reported that did not happen. Resumable: `Last-Event-ID` (or `?after=`) gets",
    "every later event, once, in order; a position older than the feed keeps",
    "(AGENT_BRIDGE_FEED_RETENTION_SECONDS) starts with a `feed_reset`.",
  ].join(" "),
  request: { query: FeedQuery, headers: FeedHeaders },
  responses: {
    200: {
      description:
        "The feed as SSE, live until the client goes (with `?follow=false`, what is stored, then it closes). Without a position the stream starts with an `id:` line alone: the position it starts from.",
      headers: z.object({
        "X-Feed-Position": z.string().openapi({
          description:
            "The feed position the stream starts after (before its first event), opaque: resume with it as `Last-Event-ID` or `?after=`.",
        }),
      }),
      content: { "text/event-stream": { schema: FeedStream } },
    },
    ...problemResponses(400, 401, 429),
  },
});
