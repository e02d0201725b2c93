import { z } from "@hono/zod-openapi";
import {
  IMAGE_MEDIA_TYPES,
  imageProblem,
  MAX_IMAGE_BASE64_CHARS,
  MAX_IMAGES,
} from "../../../agents/images.js";
import { BridgeEvent, CompletionEvent } from "../../../events.js";
import { OutputSchema } from "../../../output-schema.js";
import { Approvals, Effort, ModelName, PermissionMode } from "../../../session-settings.js";
import { Run } from "../../../wire/run.js";
import { StreamError } from "../../sse.js";
import {
  MAX_BUDGET_HELP,
  MAX_TURNS_HELP,
  MaxBudgetUsd,
  MaxTurns,
} from "../sessions/sessions.schemas.js";

export const RunId = z.uuid({ error: "expected a run id (a UUID)" }).openapi({
  param: { name: "id", in: "path" },
  example: "7d9f0c1e-5b2a-4c3d-8e4f-1a2b3c4d5e6f",
});

/**
 * What a message's images may add to its body beyond AGENT_BRIDGE_BODY_LIMIT_BYTES: each at its
 * largest, with room for its JSON around the data.
 */
export const ATTACHMENTS_MAX_BYTES = MAX_IMAGES * (MAX_IMAGE_BASE64_CHARS + 1024);

export const ImageAttachment = z
  .strictObject({
    type: z.literal("image"),
    media_type: z.enum(IMAGE_MEDIA_TYPES),
    data: z
      .string()
      .max(MAX_IMAGE_BASE64_CHARS, {
        error: `expected an image of at most ${MAX_IMAGE_BASE64_CHARS} characters of base64 (3.75 MiB)`,
      })
      .openapi({ description: "The image's bytes, base64 (standard alphabet, padded)." }),
  })
  .superRefine((image, ctx) => {
    const problem = imageProblem({ mediaType: image.media_type, data: image.data });
    if (problem) ctx.addIssue({ code: "custom", path: ["data"], message: problem });
  })
  .openapi("ImageAttachment");

export const PostMessageBody = z
  .strictObject({
    text: z.string().min(1, { error: "expected the message text" }).openapi({
      description:
        "The prompt. Sent to the CLI on stdin, so it is never read as a command-line option.",
    }),
    system_prompt: z
      .string()
      .min(1)
      .max(100_000)
      .optional()
      .openapi({ description: "Appended to the system prompt for this message only." }),
    attachments: z
      .array(ImageAttachment)
      .max(MAX_IMAGES, { error: `at most ${MAX_IMAGES} attachments` })
      .optional()
      .openapi({
        description: `Images for the agent with the text: PNG, JPEG, GIF or WebP, up to ${MAX_IMAGES}, each at most ${MAX_IMAGE_BASE64_CHARS} characters of base64 (3.75 MiB of image), checked to decode and to start as its \`media_type\` does. The body may then exceed \`AGENT_BRIDGE_BODY_LIMIT_BYTES\` by what they take. Claude Code gets them as image blocks of the message, codex as \`--image\` files (in a directory of the run's, removed after it). Their bytes are never stored: the run keeps their names, media types and sizes (the conversation's \`user_message\`), and shows its text as \`prompt\`.`,
      }),
    max_turns: MaxTurns.optional().openapi({
      description: `${MAX_TURNS_HELP} For this message's run, in place of the session's.`,
    }),
    max_budget_usd: MaxBudgetUsd.optional().openapi({
      description: `${MAX_BUDGET_HELP} For this message's run, in place of the session's.`,
    }),
    approvals: Approvals.optional().openapi({
      description:
        "Who answers this message's run's permission requests, in place of the session's `approvals`.",
    }),
    permission_mode: PermissionMode.optional().openapi({
      description:
        "How the agent may use tools in this message's run, in place of the session's: e.g. a session in `plan` mode carries out its plan with one message in `acceptEdits`, keeping the conversation.",
    }),
    model: ModelName.optional().openapi({
      description: "The model of this message's run, in place of the session's.",
    }),
    effort: Effort.optional().openapi({
      description: "The effort of this message's run, in place of the session's.",
    }),
    output_schema: OutputSchema.optional(),
    when_busy: z
      .enum(["reject", "queue"], { error: "expected `reject` or `queue`" })
      .optional()
      .openapi({
        description:
          "When the session has a live run: `reject` (the default) answers 409 `session_busy`; `queue` stores the message and runs it after the live run and any message queued before it, in order, whichever instance each reached. Overrides `Prefer: when-busy=…`.",
      }),
  })
  .openapi("PostMessage");
export type PostMessageBody = z.infer<typeof PostMessageBody>;

export const MessageHeaders = z.object({
  "idempotency-key": z
    .string()
    .min(1)
    .max(255)
    .optional()
    .openapi({
      param: { in: "header" },
      description:
        "Within 24 h, the same key for the same session returns the first request's run (and stream) instead of starting another; with a different body it is a 422.",
    }),
  prefer: z
    .string()
    .optional()
    .openapi({
      param: { in: "header" },
      description:
        "`respond-async`: answer 202 at once with `Location: /v1/runs/{run_id}`. On a message, `when-busy=queue` (or `when-busy=reject`): as the body's `when_busy`, which wins when both are given; when the header decided, the answer names it in `Preference-Applied`.",
    }),
});

/** Events are numbered in a Postgres integer: no event of any run is beyond this position. */
const MAX_EVENT_POSITION = 2_147_483_647;
const POSITION_ERROR = `expected an event id: a whole number from 0 to ${MAX_EVENT_POSITION}`;

/** Where a replay starts, as a client sends it: decimal digits, within the log's numbering. */
const eventPosition = z
  .string()
  .refine((s) => /^\d+$/.test(s) && Number(s) <= MAX_EVENT_POSITION, { error: POSITION_ERROR })
  .transform(Number);

/** Which events a stream shows: the default view, or every event the run's log holds. */
const EventsView = z
  .enum(["default", "full"])
  .default("default")
  .openapi({
    param: { name: "events", in: "query" },
    description:
      "`full` adds reasoning, subagent_text_delta, tool_call, tool_result, tool_update, session_status, available_commands, tool_rule, context_window and rate_limit events; ids then count every event.",
  });

/** A message's query: the events its stream shows. */
export const MessageQuery = z.strictObject({ events: EventsView });

export const RetryRunBody = z
  .strictObject({
    text: z.string().min(1, { error: "expected the message text" }).optional().openapi({
      description: "The prompt of the retry; by default the retried run's own.",
    }),
    output_schema: OutputSchema.optional().openapi({
      description: "The retry's `output_schema`; by default the retried run's own (if it had one).",
    }),
  })
  .openapi("RetryRun");

export const EventsQuery = z.strictObject({
  token: z
    .string()
    .max(200)
    .optional()
    .openapi({
      param: { name: "token", in: "query" },
      description:
        "A stream token from `POST /v1/runs/{id}/stream-token`, in place of `Authorization`, for clients that cannot send headers (a browser's `EventSource`).",
    }),
  after: eventPosition.optional().openapi({
    param: { name: "after", in: "query" },
    type: "integer",
    minimum: 0,
    maximum: MAX_EVENT_POSITION,
    description:
      "Replay from the event after this id (the `Last-Event-ID` header wins when both are given).",
  }),
  events: EventsView,
  follow: z
    .enum(["true", "false"], { error: "expected true or false" })
    .default("true")
    .openapi({
      param: { name: "follow", in: "query" },
      description:
        "`false`: the events stored so far, then the stream closes, also while the run goes on (it ends without a `completion` then; a client has seen no event the log does not hold). `true`: it follows the run live until its `completion`.",
    }),
});

export const EventsHeaders = z.object({
  "last-event-id": eventPosition.optional().openapi({
    param: { in: "header" },
    type: "string",
    pattern: "^\\d+$",
    description: `Resume after this event: its \`id:\`, a whole number from 0 to ${MAX_EVENT_POSITION}.`,
  }),
});

export const RunPage = z
  .object({
    data: z.array(Run),
    next_cursor: z.string().nullable().openapi({ description: "null on the last page." }),
  })
  .openapi("RunPage");

export const StreamToken = z
  .object({
    token: z.string().openapi({ description: "Pass it as `?token=`; it is shown only here." }),
    expires_at: z.string().openapi({ format: "date-time" }),
    events_url: z.string().openapi({
      description: "The run's events with the token in it, for `new EventSource(events_url)`.",
      example: "/v1/runs/7d9f0c1e-5b2a-4c3d-8e4f-1a2b3c4d5e6f/events?token=…",
    }),
  })
  .openapi("StreamToken");

export const FinishedRun = z
  .object({
    run: Run,
    completion: CompletionEvent,
    text: z.string().openapi({
      description: "Every text_delta of the run, joined: the main thread's text, no subagent's.",
    }),
  })
  .openapi("FinishedRun");

// Each frame's data: a BridgeEvent, or the StreamError of an `event: error` frame. The generator
// spreads a union nested in a union into its members; `.readonly()` keeps BridgeEvent one $ref.
export const EventStream = z
  .union([BridgeEvent.readonly(), StreamError])
  .openapi("EventStreamData", {
    description: [
      "A stream of Server-Sent Events, one per BridgeEvent: `id:` is the event's number in the run",
      "(from 1, no gaps), `event:` its type, `data:` the JSON object below. It starts with",
      "`run_started` and ends with exactly one `completion`, then closes. Lines starting with `:`",
      "are keep-alive comments. Reconnect with `Last-Event-ID` to get every later event, once.",
      "A stream the server cannot continue ends instead with an `event: error` frame without an",
      "`id:`, whose `data:` is a StreamError; it is not a completion: reconnect.",
    ].join(" "),
  });
