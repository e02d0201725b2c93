import { z } from "@hono/zod-openapi";
import { CompletionEvent, RunStatus, Usage } from "../events.js";
import { COST_PRECISION } from "../money.js";
import type { MeteredUsage as StoredMeteredUsage } from "../store/model-calls.js";
import type { CallbackRow, ReplyRow, RunRow } from "../store/schema.js";

// A run as the API shows it (`GET /v1/runs/{id}`), and as a hook's callback sends it: one shape
// for both, so a callback's receiver reads what a client reads.

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

export const ReplyState = z
  .object({
    kind: z.enum(["comment", "check", "status", "review"]).openapi({
      description:
        "`comment`: the comment (GitLab: note) on the issue or pull request; `check`: a GitHub check run; `status`: a commit status; `review`: the review's line comments.",
    }),
    state: z.enum(["pending", "posted", "failed", "skipped"]).openapi({
      description:
        "`pending`: something to send (the run started, progressed or ended), or being retried; `posted`: what there is has been sent; `failed`: refused (401, 403, 404, 422) or out of attempts, never sent again; `skipped`: nothing to post (a review whose result has no `review_comments`).",
    }),
    url: z.string().nullable().openapi({
      description: "Where people see it on the forge (`html_url`, `web_url`), once posted.",
    }),
    attempts: z.number().int(),
    last_status: z
      .number()
      .int()
      .nullable()
      .openapi({ description: "The forge's HTTP status at the last attempt, if it answered." }),
    last_error: z.string().nullable().openapi({
      description:
        "What the last failed attempt met (`http_404`, `rate_limited`, `timeout`…), or why a reply was skipped.",
    }),
    updated_at: z.string().openapi({ format: "date-time" }),
  })
  .openapi("ReplyState");
export type ReplyState = z.infer<typeof ReplyState>;

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
    output_schema: z.record(z.string(), z.unknown()).nullable().openapi({
      description:
        "The JSON Schema its agent's answer must match (its message's, its hook's, or the retried run's `output_schema`); null: none.",
    }),
    created_at: z.string().openapi({ format: "date-time" }),
    started_at: z.string().nullable().openapi({ format: "date-time" }),
    finished_at: z.string().nullable().openapi({ format: "date-time" }),
    result: z.string().nullable().openapi({ description: "The agent's final text." }),
    error: z.string().nullable(),
    structured_output: z.unknown().optional().openapi({
      description:
        "The completion's `structured_output`: present only for a run with an `output_schema` (null until it has ended, and when it did not succeed).",
    }),
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
    resume_at: z.string().nullable().openapi({
      description:
        "Where the conversation stood once this run's turn was confirmed, opaque (the agent's own mark); null until then, and for an agent that cannot resume at a message.",
    }),
    last_message_uuid: z
      .string()
      .nullable()
      .openapi({ deprecated: true, description: "`resume_at` (the same value)." }),
    events_url: z.string(),
    // A union, not .nullable(): zod-openapi renders a nullable $ref as an allOf that can never be null.
    completion: z.union([CompletionEvent, z.null()]).openapi({
      description: "The run's last event, once it has ended.",
    }),
    callback: z.union([CallbackState, z.null()]).openapi({
      description:
        "For a run started by a hook with a `callback_url`: the state of the POST of its outcome.",
    }),
    replies: z.array(ReplyState).openapi({
      description:
        "For a run started by a hook with `reply`: what it posts where its delivery came from, and how that went.",
    }),
    metered: z.union([MeteredUsage, z.null()]).openapi({
      description:
        "Its calls as the model gateway metered them, beside what its CLI reported (`completion`); `usage` and `cost_usd` are the metered figures when the CLI reported no cost (killed, crashed). null: no call of its went through the gateway.",
    }),
  })
  .openapi("Run");
export type Run = z.infer<typeof Run>;

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

export function toReplyState(row: ReplyRow): ReplyState {
  return {
    kind: ReplyState.shape.kind.parse(row.kind),
    state: ReplyState.shape.state.parse(row.state),
    url: row.url,
    attempts: row.attempts,
    last_status: row.lastStatus,
    last_error: row.lastError,
    updated_at: row.updatedAt.toISOString(),
  };
}

export function toRun(
  row: RunRow,
  completion: z.infer<typeof CompletionEvent> | null,
  callback: CallbackRow | null = null,
  awaitingApproval = false,
  metered: StoredMeteredUsage | null = null,
  replies: readonly ReplyRow[] = [],
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
    output_schema: row.outputSchema,
    created_at: row.createdAt.toISOString(),
    started_at: row.startedAt?.toISOString() ?? null,
    finished_at: row.finishedAt?.toISOString() ?? null,
    // The completion holds the run's text as the CLI wrote it (the row keeps no copy).
    result: completion?.result ?? null,
    error: completion?.error ?? null,
    ...(row.outputSchema ? { structured_output: completion?.structured_output ?? null } : {}),
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
    resume_at: row.lastMessageUuid,
    last_message_uuid: row.lastMessageUuid,
    events_url: `/v1/runs/${row.id}/events`,
    completion,
    callback: callback ? toCallbackState(callback) : null,
    replies: replies.map(toReplyState),
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
