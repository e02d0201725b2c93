import { z } from "@hono/zod-openapi";
import { COST_PRECISION } from "./money.js";

// A run's one last event, the `completion`: how it ended, what it cost and used, and where its
// conversation stands; and the usage of a run and of a session.

export const CompletionStatus = z
  .enum(["succeeded", "failed", "cancelled", "timed_out", "interrupted"])
  .openapi("CompletionStatus");

export const Usage = z
  .object({
    input_tokens: z.number().int(),
    output_tokens: z.number().int(),
    cache_read_tokens: z.number().int(),
    cache_creation_tokens: z.number().int(),
    num_turns: z.number().int(),
    duration_api_ms: z.number().int().openapi({
      description:
        "The run's own time waiting for the model's API (a resumed Claude Code session reports its running total; the session's earlier runs are taken off).",
    }),
  })
  .openapi("Usage", {
    description:
      "A run's own usage, from the agent's result; a run that ended without one (cancelled, timed out, crashed) counts what the agent reported in its messages.",
  });

export const SessionUsage = z
  .object({
    input_tokens: z.number().int(),
    output_tokens: z.number().int(),
    cache_read_tokens: z.number().int(),
    cache_creation_tokens: z.number().int(),
    cost_usd: z.number().openapi({ description: `The runs' known costs. ${COST_PRECISION}` }),
    num_turns: z.number().int(),
    runs: z.number().int(),
  })
  .openapi("SessionUsage");

/** The reasons a run can end without success that a client may act on (see `error_code`). */
export const COMPLETION_ERROR_CODES = [
  "agent_not_authenticated",
  "agent_error",
  "agent_not_found",
  "agent_start_failed",
  "agent_exited",
  "agent_stalled",
  "work_dir_not_found",
  "invalid_run_request",
  "timed_out",
  "cancelled",
  "interrupted",
  "budget_exhausted",
  "max_budget",
  "max_turns",
  "policy_denied",
  "memory_limit",
  "process_limit",
  "sandbox_required",
  "output_invalid",
] as const;
export const CompletionErrorCode = z.enum(COMPLETION_ERROR_CODES).openapi("CompletionErrorCode", {
  description:
    "Why the run did not succeed, when the bridge can tell: `agent_not_authenticated` (the CLI has no valid credentials: set ANTHROPIC_API_KEY or another login in the server's environment), `agent_error` (the CLI or its API reported an error), `agent_not_found`, `agent_start_failed`, `agent_exited` (ended without a result), `agent_stalled`, `work_dir_not_found`, `invalid_run_request`, `timed_out`, `cancelled`, `interrupted` (the bridge stopped the run: its server shut down or died, or its instance lost its lease; nothing about the run itself was wrong, so sending it again may succeed), `budget_exhausted` (the run stopped at, or did not start past, its key's monthly `max_budget_usd`), `max_budget` (the run stopped at its own `max_budget_usd`, the session's or its message's), `max_turns` (the run stopped at its `max_turns`), `policy_denied` (its key's policy no longer allows the session's options), `memory_limit` (the run went over its memory limit, AGENT_BRIDGE_RUN_MEMORY_MB: the kernel killed one of its processes, and the bridge stopped the run), `process_limit` (the run reached its process limit, AGENT_BRIDGE_RUN_MAX_PROCESSES: a fork failed, and the bridge stopped the run), `sandbox_required` (runs cannot be sandboxed on this server and several API keys exist: no tenant's agent runs beside another's unsandboxed), `output_invalid` (the run had an `output_schema` and the agent's answer is missing or does not match it: `error` says how, `result` keeps its text). Absent on success and when the bridge itself failed.",
});
export type CompletionErrorCode = z.infer<typeof CompletionErrorCode>;

export const CompletionEvent = z
  .object({
    type: z.literal("completion"),
    status: CompletionStatus,
    is_error: z.boolean(),
    result: z.string().nullable(),
    error: z.string().nullable(),
    error_code: CompletionErrorCode.optional(),
    cost_usd: z
      .number()
      .nullable()
      .openapi({
        description: `What the run cost in USD, as the agent reported it (Claude Code), or from the price of its model (Codex: the price table, AGENT_BRIDGE_MODEL_PRICES); null when neither is known, never a guess (a Claude Code run that spent tokens but ended without its result, e.g. cancelled: the CLI reports cost only in its result). ${COST_PRECISION}`,
      }),
    duration_ms: z.number().int(),
    usage: Usage,
    // Filled by the run manager once the run's usage is added to its session.
    session_usage: SessionUsage.optional(),
    agent_session_id: z.string().nullable().openapi({
      description:
        "The agent CLI's own session (Claude Code) or thread (Codex) id, as it reported it.",
    }),
    claude_session_id: z.string().nullable().openapi({
      deprecated: true,
      description: "`agent_session_id` of a Claude Code run (null for other agents).",
    }),
    resume_at: z.string().nullable().openapi({
      description:
        "Where the conversation stands once the run's turn is confirmed, opaque (the agent's own mark: Claude Code's last message of the run); null for a run that failed or stopped without one, and for an agent that cannot resume at a message: where `POST /v1/runs/{id}/retry` of a later run resumes the conversation.",
    }),
    last_message_uuid: z.string().nullable().openapi({
      deprecated: true,
      description: "`resume_at` (the same value).",
    }),
    structured_output: z.unknown().optional().openapi({
      description:
        "The agent's answer as the run's `output_schema` asked for it, checked against the schema (any JSON value the schema allows; an object at the top). Present only when the run had an `output_schema`; null when the run did not succeed (`error_code: output_invalid` when the answer was missing or did not match).",
    }),
    work_dir_dirty: z.boolean().optional().openapi({
      description:
        "Present when the session has `require_clean_work_dir` and its check ran: whether the agent stopped with uncommitted changes in its work dir all the same (the run's status is not changed by it).",
    }),
    dropped_lines: z.number().int().min(1).optional().openapi({
      description:
        "Lines of the CLI's output dropped for being over AGENT_BRIDGE_MAX_LINE_BYTES; the events they held (text included) are missing. Absent when none was.",
    }),
  })
  .openapi("CompletionEvent");

export type CompletionEvent = z.infer<typeof CompletionEvent>;
export type Usage = z.infer<typeof Usage>;
export type SessionUsage = z.infer<typeof SessionUsage>;
/** What a session's earlier runs used: its totals, and their time waiting for the API. */
export type UsageBefore = SessionUsage & { duration_api_ms: number };
export type CompletionStatusValue = z.infer<typeof CompletionStatus>;

/** A run's usage before anything is counted. */
export function noUsage(): Usage {
  return {
    input_tokens: 0,
    output_tokens: 0,
    cache_read_tokens: 0,
    cache_creation_tokens: 0,
    num_turns: 0,
    duration_api_ms: 0,
  };
}

/** A completion for a run that ended without the CLI reporting usage (never started, crashed). */
export function bareCompletion(status: CompletionStatusValue, error: string): CompletionEvent {
  return {
    type: "completion",
    status,
    is_error: true,
    result: null,
    error,
    cost_usd: 0,
    duration_ms: 0,
    usage: noUsage(),
    agent_session_id: null,
    claude_session_id: null,
    resume_at: null,
    last_message_uuid: null,
  };
}
