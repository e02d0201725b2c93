import type { RouteHandler } from "@hono/zod-openapi";
import { feedStart, followFeed } from "../../../cluster/feed.js";
import { type FeedFilter, feedPositionText } from "../../../store/feed.js";
import type { AppEnv } from "../../context.js";
import { sseFramesResponse } from "../../sse.js";
import { admitStream } from "../../streams.js";
import type * as routes from "./feed.routes.js";

export const getFeed: RouteHandler<typeof routes.getFeed, AppEnv> = async (c) => {
  const query = c.req.valid("query");
  const resume = c.req.valid("header")["last-event-id"] ?? query.after;
  const { db, doorbell, config, logger, principal, clock } = c.var;
  const filter: FeedFilter = {
    // An admin sees every session's events, any other key its own sessions'.
    ...(principal.admin ? {} : { ownerKeyId: principal.keyId }),
    ...(query.session_id ? { sessionId: query.session_id } : {}),
    ...(query.types ? { types: query.types } : {}),
  };
  const release = admitStream(c.var.streams, principal);
  // Watched before the first read: a row committed meanwhile rings, and is read next.
  const watch = doorbell.watchFeed();
  try {
    const start = await feedStart(db, resume, filter, new Date(clock.now()));
    return sseFramesResponse(
      (signal) => followFeed(db, watch, start, filter, query.follow === "true", signal),
      {
        keepAliveMs: config.runs.keepAliveMs,
        logger: logger.child({ stream: "feed" }),
        headers: { "X-Feed-Position": feedPositionText(start.position) },
        onClose: release,
      },
    );
  } catch (err) {
    watch.close();
    release();
    throw err;
  }
};
