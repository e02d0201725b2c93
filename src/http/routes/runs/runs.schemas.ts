import { z } from "@hono/zod-openapi";
import {
  IMAGE_MEDIA_TYPES,
  imageProblem,
  MAX_IMAGE_BASE64_CHARS,
  MAX_IMAGES,
} from "../../../agents/images.js";
import { BridgeEvent, CompletionEvent, RunStatus, Usage } from "../../../events.js";
import { COST_PRECISION } from "../../../money.js";
import { Approvals, Effort, ModelName, PermissionMode } from "../../../session-settings.js";
import type { MeteredUsage as StoredMeteredUsage } from "../../../store/model-calls.js";
import type { CallbackRow, RunRow } from "../../../store/schema.js";
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
        description: `Images for the agent with the text: PNG, JPEG, GIF or WebP, up to ${MAX_IMAGES}, each at most ${MAX_IMAGE_BASE64_CHARS} characters of base64 (3.75 MiB of image), checked to decode and to start as its \`media_type\` does. The body may then exceed \`AGENT_BRIDGE_BODY_LIMIT_BYTES\` by what they take. Claude Code gets them as image blocks of the message, codex as \`--image\` files (in a directory of the run's, removed after it). Never stored: the run shows only its text as \`prompt\`.`,
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
      description: "`respond-async`: answer 202 at once with `Location: /v1/runs/{run_id}`.",
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
      "`full` adds reasoning, subagent_text_delta, tool_call, tool_result, tool_update, session_status, available_commands, context_window and rate_limit events; ids then count every event.",
  });

/** A message's query: the events its stream shows. */
export const MessageQuery = z.strictObject({ events: EventsView });

export const RetryRunBody = z
  .strictObject({
    text: z.string().min(1, { error: "expected the message text" }).optional().openapi({
      description: "The prompt of the retry; by default the retried run's own.",
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

export const CallbackState = z
  .object({
    state: z.enum(["pending", "delivered", "failed"]).openapi({
      description:
        "`pending`: not sent yet (the run is going) or being retried; `delivered`: a 2xx came back, and it is never sent again; `failed`: every attempt failed.",
    }),
    url: z.string(),
    attempts: z.number().int(),
    last_status: z
      .number()
      .int()
      .nullable()
      .openapi({ description: "The receiver's HTTP status at the last attempt, if it answered." }),
    last_error: z.string().nullable().openapi({
      description:
        "What the last failed attempt met, in a word: `http_<status>`, `timeout`, `unreachable`, `unresolvable`, `tls_error`, `blocked_address (<why>)` (an address inside), `interrupted`.",
    }),
    next_attempt_at: z.string().nullable().openapi({
      format: "date-time",
      description: "When a pending callback is tried next; null while the run is going.",
    }),
    delivered_at: z.string().nullable().openapi({ format: "date-time" }),
  })
  .openapi("CallbackState");
export type CallbackState = z.infer<typeof CallbackState>;

export const MeteredUsage = z
  .object({
    calls: z.number().int(),
    input_tokens: z.number().int(),
    output_tokens: z.number().int(),
    cache_read_tokens: z.number().int(),
    cache_creation_tokens: z.number().int(),
    cost_usd: z
      .number()
      .nullable()
      .openapi({
        description: `At each call's model's price; null when a call's model has none. ${COST_PRECISION}`,
      }),
  })
  .openapi("MeteredUsage", {
    description:
      "What the model gateway metered of a run's calls to its model API, by the API's own account.",
  });

export const Run = z
  .object({
    id: z.string(),
    session_id: z.string(),
    status: RunStatus,
    trigger: z.string().openapi({ example: "message" }),
    prompt: z.string(),
    system_prompt: z.string().nullable(),
    created_at: z.string().openapi({ format: "date-time" }),
    started_at: z.string().nullable().openapi({ format: "date-time" }),
    finished_at: z.string().nullable().openapi({ format: "date-time" }),
    result: z.string().nullable().openapi({ description: "The agent's final text." }),
    error: z.string().nullable(),
    usage: Usage,
    cost_usd: z
      .number()
      .nullable()
      .openapi({
        description: `null when neither the agent nor a configured price says. ${COST_PRECISION}`,
      }),
    duration_ms: z.number().int().nullable(),
    agent: z.string().openapi({ description: "Its session's agent back-end.", example: "claude" }),
    agent_session_id: z.string().nullable().openapi({
      description: "The agent CLI's own session or thread id, once a run reported it.",
    }),
    claude_session_id: z
      .string()
      .nullable()
      .openapi({ deprecated: true, description: "`agent_session_id` of a Claude Code run." }),
    last_message_uuid: z.string().nullable(),
    events_url: z.string(),
    // A union, not .nullable(): zod-openapi renders a nullable $ref as an allOf that can never be null.
    completion: z.union([CompletionEvent, z.null()]).openapi({
      description: "The run's last event, once it has ended.",
    }),
    callback: z.union([CallbackState, z.null()]).openapi({
      description:
        "For a run started by a hook with a `callback_url`: the state of the POST of its outcome.",
    }),
    metered: z.union([MeteredUsage, z.null()]).openapi({
      description:
        "Its calls as the model gateway metered them, beside what its CLI reported (`completion`); `usage` and `cost_usd` are the metered figures when the CLI reported no cost (killed, crashed). null: no call of its went through the gateway.",
    }),
  })
  .openapi("Run");
export type Run = z.infer<typeof Run>;

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

export function toCallbackState(row: CallbackRow): CallbackState {
  return {
    state: z.enum(["pending", "delivered", "failed"]).parse(row.state),
    url: row.url,
    attempts: row.attempts,
    last_status: row.lastStatus,
    last_error: row.lastError,
    next_attempt_at: row.state === "pending" ? (row.nextAttemptAt?.toISOString() ?? null) : null,
    delivered_at: row.deliveredAt?.toISOString() ?? null,
  };
}

export function toRun(
  row: RunRow,
  completion: z.infer<typeof CompletionEvent> | null,
  callback: CallbackRow | null = null,
  awaitingApproval = false,
  metered: StoredMeteredUsage | null = null,
): Run {
  return {
    id: row.id,
    session_id: row.sessionId,
    // A run waiting for its session (a webhook delivery behind another run) is queued too.
    status: RunStatus.parse(
      row.status === "waiting"
        ? "queued"
        : row.status === "running" && awaitingApproval
          ? "awaiting_approval"
          : row.status,
    ),
    trigger: row.trigger,
    prompt: row.prompt,
    system_prompt: row.systemPrompt,
    created_at: row.createdAt.toISOString(),
    started_at: row.startedAt?.toISOString() ?? null,
    finished_at: row.finishedAt?.toISOString() ?? null,
    // The completion holds the run's text as the CLI wrote it (the row keeps no copy).
    result: completion?.result ?? null,
    error: completion?.error ?? null,
    usage: {
      input_tokens: row.inputTokens,
      output_tokens: row.outputTokens,
      cache_read_tokens: row.cacheReadTokens,
      cache_creation_tokens: row.cacheCreationTokens,
      num_turns: row.numTurns,
      duration_api_ms: row.durationApiMs ?? 0,
    },
    cost_usd: row.costUsd,
    duration_ms: row.durationMs,
    agent: row.agent,
    agent_session_id: row.agentSessionId,
    claude_session_id: row.agent === "claude" ? row.agentSessionId : null,
    last_message_uuid: row.lastMessageUuid,
    events_url: `/v1/runs/${row.id}/events`,
    completion,
    callback: callback ? toCallbackState(callback) : null,
    metered: metered && {
      calls: metered.calls,
      input_tokens: metered.inputTokens,
      output_tokens: metered.outputTokens,
      cache_read_tokens: metered.cacheReadTokens,
      cache_creation_tokens: metered.cacheCreationTokens,
      cost_usd: metered.pricedCalls === metered.calls ? metered.costUsd : null,
    },
  };
}
