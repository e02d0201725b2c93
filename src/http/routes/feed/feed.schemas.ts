import { z } from "@hono/zod-openapi";
import { CompletionErrorCode, CompletionStatus } from "../../../completion-event.js";
import {
  FEED_BEGINNING,
  FEED_EVENT_TYPES,
  type FeedEventType,
  parseFeedPosition,
} from "../../../store/feed.js";
import { StreamError } from "../../sse.js";

const POSITION_ERROR =
  "expected a feed position: an event's id as the feed gave it (`<xid>-<id>`), or 0 for everything the feed holds";

const feedPosition = z
  .string()
  .max(41, { error: POSITION_ERROR })
  .transform((s, ctx) => {
    const position = parseFeedPosition(s);
    if (!position) ctx.addIssue({ code: "custom", message: POSITION_ERROR });
    return position ?? FEED_BEGINNING;
  });

/** A position as OpenAPI shows it: opaque, as the feed gave it. */
const POSITION_PATTERN = "^(0|[0-9]{1,20}-[0-9]{1,19})?$";

const TYPES_ERROR = `expected a comma-separated list of feed event types: ${FEED_EVENT_TYPES.join(", ")}`;

export const FeedQuery = z.strictObject({
  after: feedPosition.optional().openapi({
    param: { name: "after", in: "query" },
    type: "string",
    pattern: POSITION_PATTERN,
    example: "7341-120",
    description:
      "Replay from the event after this position: an event's `id:` (or the `X-Feed-Position` header), opaque (the `Last-Event-ID` header wins when both are given); `0` or empty: everything the feed still holds. Without either, the stream starts with the events from now on.",
  }),
  session_id: z
    .uuid({ error: "expected a session id (a UUID)" })
    .optional()
    .openapi({
      param: { name: "session_id", in: "query" },
      description: "Only the events of this session.",
    }),
  types: z
    .string()
    .max(500, { error: TYPES_ERROR })
    .refine(
      (s) => s.split(",").every((t) => (FEED_EVENT_TYPES as readonly string[]).includes(t.trim())),
      { error: TYPES_ERROR },
    )
    .transform((s) => [...new Set(s.split(",").map((t) => t.trim() as FeedEventType))])
    .optional()
    .openapi({
      param: { name: "types", in: "query" },
      type: "string",
      description: `Only events of these types, comma-separated (${FEED_EVENT_TYPES.join(", ")}); \`feed_reset\` always comes.`,
      example: "run_finished,permission_requested",
    }),
  follow: z
    .enum(["true", "false"], { error: "expected true or false" })
    .default("true")
    .openapi({
      param: { name: "follow", in: "query" },
      description:
        "`false`: the events stored so far, then the stream closes. `true`: it stays open and follows the feed live.",
    }),
});

export const FeedHeaders = z.object({
  "last-event-id": feedPosition.optional().openapi({
    param: { in: "header" },
    type: "string",
    pattern: POSITION_PATTERN,
    description: "Resume after this event: its `id:` (opaque; `0`: everything the feed holds).",
  }),
});

const at = z.string().openapi({ format: "date-time", description: "When it happened." });
const keyId = z.uuid().nullable().openapi({
  description: "The API key that owns the session (null on a server without keys).",
});
const sessionId = z.uuid();
const runId = z.uuid();

const base = { at, key_id: keyId, session_id: sessionId };
const ofRun = { ...base, run_id: runId };

export const FeedSessionCreated = z
  .object({
    type: z.literal("session_created"),
    ...base,
    agent: z.string(),
    title: z.string().nullable(),
    forked_from: sessionId
      .optional()
      .openapi({ description: "Set on a fork: the session it was forked from." }),
  })
  .openapi("FeedSessionCreated");

export const FeedSessionDeleted = z
  .object({ type: z.literal("session_deleted"), ...base })
  .openapi("FeedSessionDeleted");

export const FeedRunQueued = z
  .object({
    type: z.literal("run_queued"),
    ...ofRun,
    status: z.enum(["queued", "waiting"]).openapi({
      description: "`waiting`: behind its session's active run; `queued`: for a free slot.",
    }),
    trigger: z.string().openapi({ example: "message" }),
    agent: z.string(),
  })
  .openapi("FeedRunQueued");

export const FeedRunStarted = z
  .object({ type: z.literal("run_started"), ...ofRun })
  .openapi("FeedRunStarted");

export const FeedRunFinished = z
  .object({
    type: z.literal("run_finished"),
    ...ofRun,
    status: CompletionStatus,
    error_code: CompletionErrorCode.optional(),
    cost_usd: z.number().nullable(),
    duration_ms: z.number().int(),
  })
  .openapi("FeedRunFinished");

export const FeedPermissionRequested = z
  .object({
    type: z.literal("permission_requested"),
    ...ofRun,
    request_id: z.string(),
    tool_name: z.string(),
    expires_at: z.string().openapi({ format: "date-time" }),
  })
  .openapi("FeedPermissionRequested");

export const FeedPermissionResolved = z
  .object({
    type: z.literal("permission_resolved"),
    ...ofRun,
    request_id: z.string(),
    state: z.enum(["allowed", "denied", "expired", "cancelled"]),
    by: z.string().nullable().openapi({ description: "client, timeout or cancel." }),
  })
  .openapi("FeedPermissionResolved");

export const FeedReset = z
  .object({
    type: z.literal("feed_reset"),
    at,
    after: z.string().openapi({ description: "The position the client asked to resume at." }),
    message: z.string(),
  })
  .openapi("FeedReset", {
    description:
      "The feed no longer holds every event after the position asked for (it keeps AGENT_BRIDGE_FEED_RETENTION_SECONDS), or never held it: some events may be missed. What follows is everything it holds; re-read the state you keep (runs, sessions).",
  });

export const FeedEvent = z
  .discriminatedUnion("type", [
    FeedSessionCreated,
    FeedSessionDeleted,
    FeedRunQueued,
    FeedRunStarted,
    FeedRunFinished,
    FeedPermissionRequested,
    FeedPermissionResolved,
    FeedReset,
  ])
  .openapi("FeedEvent");

export const FeedStream = z.union([FeedEvent.readonly(), StreamError]).openapi("FeedStreamData", {
  description: [
    "A stream of Server-Sent Events, one per feed event: `id:` is its place in the feed",
    "(an opaque string), `event:` its type, `data:` the JSON object below. Lines starting",
    "with `:` are keep-alive comments. Reconnect with `Last-Event-ID` to get every later event,",
    "once. A stream the server cannot continue ends with an `event: error` frame without an",
    "`id:` (a StreamError): reconnect.",
  ].join(" "),
});
