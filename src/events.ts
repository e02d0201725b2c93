import { z } from "@hono/zod-openapi";
import { CompletionEvent } from "./completion-event.js";
import { NormalizedToolCall, ToolKind, ToolOutcome } from "./tool-calls.js";

// BridgeEvents: the generic events a run produces, shared by the runner (which yields them),
// the run manager (which numbers, stores and fans them out) and the HTTP layer (which documents
// and streams them). One schema per SSE event type; the wire name is the `type` field. The
// completion, a run's one last event, and its usage are in completion-event.ts.

export {
  bareCompletion,
  COMPLETION_ERROR_CODES,
  CompletionErrorCode,
  CompletionEvent,
  CompletionStatus,
  type CompletionStatusValue,
  SessionUsage,
  Usage,
  type UsageBefore,
} from "./completion-event.js";

export const RunStatus = z
  .enum([
    "queued",
    "running",
    "awaiting_approval",
    "succeeded",
    "failed",
    "cancelled",
    "timed_out",
    "interrupted",
  ])
  .openapi("RunStatus", {
    description:
      "`awaiting_approval`: running, and a permission request waits for an answer (`GET /v1/runs/{id}/permissions`).",
  });
const parent = { parent_tool_use_id: z.string().nullable().optional() };

export const RunStartedEvent = z
  .object({
    type: z.literal("run_started"),
    run_id: z.string(),
    session_id: z.string(),
    trigger: z.string(),
    queued_ms: z.number().int(),
    trace_id: z.string().optional().openapi({
      description:
        "The run's OpenTelemetry trace id (32 hex digits), when the server exports traces (OTEL_EXPORTER_OTLP_ENDPOINT); absent otherwise.",
    }),
  })
  .openapi("RunStartedEvent");

export const TextDeltaEvent = z
  .object({ type: z.literal("text_delta"), text: z.string() })
  .openapi("TextDeltaEvent", {
    description:
      "The main thread's text as it streams: what the agent says to the user. Separate messages are joined with a blank line; a subagent's text is a `subagent_text_delta` instead.",
  });

export const StatusEvent = z
  .object({
    type: z.literal("status"),
    message: z.string(),
    tool_name: z.string().optional(),
    tool_use_id: z.string().optional(),
    ...parent,
  })
  .openapi("StatusEvent", {
    description:
      'What the agent is doing or waiting for: a tool starting ("Using Bash…", with `tool_name` and `tool_use_id`), the API being retried ("API error (529 overloaded), retrying 3/10 in 8 s") or a rate limit.',
  });

export const UserQuestion = z
  .object({
    question: z.string(),
    header: z.string().optional(),
    options: z.array(z.object({ label: z.string(), description: z.string().optional() })),
    multi_select: z.boolean(),
  })
  .openapi("UserQuestion");

export const UserQuestionEvent = z
  .object({
    type: z.literal("user_question"),
    tool_use_id: z.string(),
    questions: z.array(UserQuestion),
    request_id: z.string().optional().openapi({
      description:
        "Present when a client can answer (`approvals: api`): answer at `POST /v1/runs/{id}/permissions/{request_id}` with `answers`.",
    }),
    expires_at: z.string().optional().openapi({
      format: "date-time",
      description: "With `request_id`: when the question is denied if nobody answers.",
    }),
    ...parent,
  })
  .openapi("UserQuestionEvent", {
    description:
      "The agent asks the user a question (AskUserQuestion). With `approvals: api` it comes after its `permission_request` and carries that request's id; otherwise the bridge refuses it and the model asks in its reply instead.",
  });

export const PermissionRequestEvent = z
  .object({
    type: z.literal("permission_request"),
    request_id: z.string().openapi({
      description: "Answer it at `POST /v1/runs/{id}/permissions/{request_id}`.",
    }),
    tool_name: z.string(),
    tool_use_id: z.string().nullable(),
    input: z.record(z.string(), z.unknown()),
    suggestions: z.array(z.unknown()).openapi({
      description:
        "The agent's own suggestions of rules that would allow the call (Claude Code's `permission_suggestions`); an answer with `scope: session` adds them for the session.",
    }),
    blocked_path: z.string().optional(),
    decision_reason: z.string().optional(),
    title: z.string().optional(),
    description: z.string().optional(),
    expires_at: z.string().nullable().openapi({
      format: "date-time",
      description:
        "When the request is denied if nobody answers (`approvals: api`); null when the bridge answers it at once (`approvals: deny`).",
    }),
  })
  .openapi("PermissionRequestEvent", {
    description:
      "The agent asks to use a tool its permission mode does not allow, or asks the user a question (`tool_name: AskUserQuestion`, also streamed as `user_question`). Followed by its `permission_resolved` or `permission_cancelled`.",
  });

export const PermissionResolvedEvent = z
  .object({
    type: z.literal("permission_resolved"),
    request_id: z.string(),
    decision: z.enum(["allow", "deny"]),
    scope: z.enum(["once", "session"]).optional(),
    by: z.enum(["client", "timeout", "policy", "cancel"]).openapi({
      description:
        "`client`: an answer over the API; `timeout`: nobody answered within `approval_timeout_seconds`; `policy`: the session's `approvals: deny`; `cancel`: the run ended first.",
    }),
    message: z.string().optional(),
    updated_input: z.record(z.string(), z.unknown()).optional().openapi({
      description:
        "With `decision: allow`: the input the tool was allowed to run with, when the answer changed the `input` of its `permission_request` (`updated_input`, or a question's `answers`); absent when it runs as asked.",
    }),
    key_id: z.string().optional().openapi({
      description:
        "With `by: client`: the id of the API key that answered (see `GET /v1/keys`); absent when the server runs without keys.",
    }),
  })
  .openapi("PermissionResolvedEvent");

export const PermissionCancelledEvent = z
  .object({ type: z.literal("permission_cancelled"), request_id: z.string() })
  .openapi("PermissionCancelledEvent", {
    description: "The agent withdrew the request: it wants no answer any more.",
  });

export const UserInputEvent = z
  .object({
    type: z.literal("user_input"),
    input_id: z
      .string()
      .openapi({ description: "The id `POST /v1/runs/{id}/input` answered with." }),
    text: z.string(),
    images: z.number().int().optional().openapi({
      description: "How many images came with it (never stored: only their number is).",
    }),
  })
  .openapi("UserInputEvent", {
    description:
      "A client's message to the live run (`POST /v1/runs/{id}/input`), written to the agent as the user's next turn: the agent answers it after the turn in progress, within the same run.",
  });

export const ControlEvent = z
  .object({
    type: z.literal("control"),
    control_id: z.string(),
    model: z.string().optional().openapi({
      description: "The model the agent now calls, as it named it (an alias resolved).",
    }),
    permission_mode: z.string().optional(),
  })
  .openapi("ControlEvent", {
    description:
      "A client switched the live run's model or permission mode (`POST /v1/runs/{id}/control`), and the agent took it: its next API call uses them.",
  });

// Internal events: produced by the runner, kept in the log, shown only with `?events=full`.
export const ReasoningEvent = z
  .object({ type: z.literal("reasoning"), text: z.string(), ...parent })
  .openapi("ReasoningEvent");

export const SubagentTextDeltaEvent = z
  .object({
    type: z.literal("subagent_text_delta"),
    text: z.string(),
    parent_tool_use_id: z
      .string()
      .openapi({ description: "The tool call that runs the subagent." }),
  })
  .openapi("SubagentTextDeltaEvent", {
    description:
      "A subagent's text (Claude Code's Task/Agent tool): it talks to the main thread, not to the user, so it is kept out of `text_delta`, JSON-mode `text` and callbacks.",
  });

export const SessionStatusEvent = z
  .object({
    type: z.literal("session_status"),
    status: z.enum(["new", "resumed"]).openapi({
      description: "`new`: the run started the agent's conversation; `resumed`: it continued it.",
    }),
    agent_session_id: z.string().nullable().openapi({
      description: "The agent CLI's own session (Claude Code) or thread (Codex) id.",
    }),
    model: z
      .string()
      .nullable()
      .openapi({ description: "The model the agent says it runs; null when it does not say." }),
    tools: z
      .array(z.string())
      .optional()
      .openapi({ description: "The tools offered to the model, when the agent lists them." }),
    mcp_servers: z
      .array(z.object({ name: z.string(), status: z.string() }))
      .optional()
      .openapi({
        description: "The MCP servers and their status (`connected`, `failed`…), when listed.",
      }),
  })
  .openapi("SessionStatusEvent");

export const AvailableCommandsEvent = z
  .object({
    type: z.literal("available_commands"),
    commands: z
      .array(
        z.object({
          name: z.string(),
          description: z.string().optional().openapi({
            description:
              "What the command does, when the agent says (Claude Code's answer to `initialize`).",
          }),
          argument_hint: z.string().optional().openapi({
            description:
              "What the command takes after its name (`[issue description]`), when it takes something.",
          }),
        }),
      )
      .openapi({
        description: "The slash commands a message may start with (`/compact`, `/cost`…).",
      }),
  })
  .openapi("AvailableCommandsEvent");

export const ToolRuleEvent = z
  .object({
    type: z.literal("tool_rule"),
    tool_use_id: z.string().nullable(),
    tool_name: z.string(),
    decision: z.enum(["allow", "ask", "deny"]).openapi({
      description:
        "What the rule said: `deny` (the tool use refused with its reason), `ask` (a permission_request follows), `allow` (the permission mode decides).",
    }),
    source: z.enum(["key", "session"]).openapi({ description: "Whose list the rule is in." }),
    rule_index: z.number().int().openapi({
      description: "The rule's index in its list, as given (a preset's: the preset's).",
    }),
    preset: z.string().optional().openapi({ description: "The preset the rule comes from." }),
    reason: z.string().optional().openapi({ description: "What the agent was told." }),
  })
  .openapi("ToolRuleEvent", {
    description: "A tool rule (the key's or the session's) decided one of the agent's tool uses.",
  });

export const StopCheckEvent = z
  .object({
    type: z.literal("stop_check"),
    dirty: z.boolean().openapi({
      description: "Whether `git status --porcelain` listed changes in the agent's work dir.",
    }),
    files: z.array(z.string()).openapi({
      description: "The changed files, as git lists them (the first 50).",
    }),
    more_files: z.number().int().min(1).optional().openapi({
      description: "How many more changed files there are than listed; absent when none.",
    }),
    blocked: z.boolean().openapi({
      description:
        "Whether the agent was sent back to commit them or say why they stay; false once it was sent back twice in the turn, or when the work dir is clean.",
    }),
    attempt: z.number().int().min(1).openapi({
      description: "The agent's try at stopping in the turn, from 1.",
    }),
    not_repository: z.literal(true).optional().openapi({
      description: "The work dir is no git repository: the agent is let stop (said once a run).",
    }),
    error: z.string().optional().openapi({
      description: "Why git could not tell: the agent is let stop.",
    }),
  })
  .openapi("StopCheckEvent", {
    description:
      "The session's `require_clean_work_dir` check of the work dir when the agent tried to end its turn.",
  });

export const ToolCallEvent = z
  .object({
    type: z.literal("tool_call"),
    tool_use_id: z.string(),
    tool_name: z.string(),
    kind: ToolKind,
    normalized: NormalizedToolCall,
    input: z.unknown(),
    ...parent,
  })
  .openapi("ToolCallEvent");

/** A tool call's end: from its result, or at the run's end for a call that never got one. */
export const ToolUpdateEvent = z
  .object({
    type: z.literal("tool_update"),
    tool_use_id: z.string(),
    status: z.enum(["complete", "error"]),
    normalized: ToolOutcome,
    ...parent,
  })
  .openapi("ToolUpdateEvent");

export const ToolResultEvent = z
  .object({
    type: z.literal("tool_result"),
    tool_use_id: z.string(),
    is_error: z.boolean(),
    content: z.string(),
    truncated: z.boolean(),
    ...parent,
  })
  .openapi("ToolResultEvent");

export const ContextWindowEvent = z
  .object({
    type: z.literal("context_window"),
    used: z.number().int().openapi({
      description:
        "Tokens of the conversation after the message: its input (cache included) and output.",
    }),
    size: z.number().int().openapi({
      description:
        "The model's context window: its documented one until the agent reports its own (Claude Code: only in the run's result, so each run starts from the documented one).",
    }),
    remaining: z.number().int().openapi({ description: "`size - used`, never below 0." }),
    efficiency: z.number().openapi({ description: "`used / size`: the fraction in use." }),
  })
  .openapi("ContextWindowEvent", {
    description: "After each main-thread assistant message, and once more at the run's result.",
  });

export const RateLimitEvent = z
  .object({ type: z.literal("rate_limit"), info: z.record(z.string(), z.unknown()) })
  .openapi("RateLimitEvent");

export const BridgeEvent = z
  .discriminatedUnion("type", [
    RunStartedEvent,
    TextDeltaEvent,
    StatusEvent,
    UserQuestionEvent,
    PermissionRequestEvent,
    PermissionResolvedEvent,
    PermissionCancelledEvent,
    UserInputEvent,
    ControlEvent,
    ReasoningEvent,
    SubagentTextDeltaEvent,
    SessionStatusEvent,
    AvailableCommandsEvent,
    ToolRuleEvent,
    StopCheckEvent,
    ToolCallEvent,
    ToolResultEvent,
    ToolUpdateEvent,
    ContextWindowEvent,
    RateLimitEvent,
    CompletionEvent,
  ])
  .openapi("BridgeEvent");

export type BridgeEvent = z.infer<typeof BridgeEvent>;
export type BridgeEventType = BridgeEvent["type"];
export type UserQuestion = z.infer<typeof UserQuestion>;

/** Events a client sees without `?events=full`. */
export const PUBLIC_EVENT_TYPES: ReadonlySet<BridgeEventType> = new Set([
  "run_started",
  "text_delta",
  "status",
  "user_question",
  "permission_request",
  "permission_resolved",
  "permission_cancelled",
  "user_input",
  "control",
  "completion",
]);
