import type { Json } from "../line-fields.js";

// The stream-json lines of Claude Code that the bridge reads, typed after the Agent SDK's own
// message types (@anthropic-ai/claude-agent-sdk's sdk.d.ts: SDKMessage and its members), each cut
// down to the fields the mapper and the control protocol use. sdk-lines.ts narrows a parsed line
// to one of these once; past it nothing reads a line field by field.
// Our own mirror, not the SDK as a type-only devDependency: the SDK ships a second copy of the
// CLI and types its lines as trusted (every field present) through @anthropic-ai/sdk's types,
// while a line is untrusted here (a field is absent when missing or of the wrong type), and the
// CLI writes fields the SDK does not type (`api_message_id`, `is_api_error_message`,
// `model_usage_since_last_result`).

/** Fields every line may carry. */
interface SDKLine {
  session_id?: string;
  /** The subagent's tool use a line comes from (its Task call); null on the main thread. */
  parent_tool_use_id: string | null;
}

/** An API message's token counts (the Messages API's `usage`); a missing count is 0. */
export interface SDKUsage {
  input_tokens: number;
  output_tokens: number;
  cache_read_input_tokens: number;
  cache_creation_input_tokens: number;
}

/** A Messages API message as the stream and the assistant lines carry it. */
export interface SDKApiMessage {
  id?: string;
  model?: string;
  usage?: SDKUsage;
}

export type SDKContentBlock =
  | { type: "text"; text: string }
  | { type: "thinking"; thinking: string }
  | { type: "tool_use"; id?: string; name?: string; input: unknown };

export interface SDKToolResultBlock {
  type: "tool_result";
  tool_use_id: string;
  is_error: boolean;
  /** A string, or content blocks (text, images…): tool-uses.ts makes it one text. */
  content: unknown;
}

/** `system` `init`: the session, its model, tools, MCP servers and slash commands. */
export interface SDKSystemMessage extends SDKLine {
  type: "system";
  subtype: "init";
  model?: string;
  /** The directory the CLI runs in (its shell's commands start there). */
  cwd?: string;
  tools: string[];
  mcp_servers: { name: string; status?: string }[];
  slash_commands: string[];
}

/** `system` `api_retry`: the CLI retries a failed API call. */
export interface SDKAPIRetryMessage extends SDKLine {
  type: "system";
  subtype: "api_retry";
  attempt: number;
  max_retries: number;
  retry_delay_ms: number;
  error_status?: number;
  error?: string;
}

export interface SDKAssistantMessage extends SDKLine {
  type: "assistant";
  uuid?: string;
  message: SDKApiMessage & { content: SDKContentBlock[] };
  /** A synthetic message standing for an API error (its text is the error, not the model's). */
  is_api_error_message: boolean;
  error?: string;
}

export interface SDKUserMessage extends SDKLine {
  type: "user";
  uuid?: string;
  /** A string (a prompt, or a local command's output replayed), or the tool results it holds. */
  message: { content: string | SDKToolResultBlock[] | undefined };
  /** The CLI's structured output of the tool the line answers (a command's stdout and stderr). */
  tool_use_result?: unknown;
  /** Replayed by the CLI, as a local slash command's output is. */
  isReplay: boolean;
  /**
   * Written by the CLI itself, not the user: with `--json-schema`, the `[structured-output-enforce]`
   * reminder it adds when the model answered without calling StructuredOutput.
   */
  isSynthetic: boolean;
}

/** One event of the Messages API's stream (`--include-partial-messages`). */
export type SDKStreamEvent =
  | { type: "message_start"; message: SDKApiMessage }
  | { type: "content_block_start"; content_block: { type?: string; id?: string; name?: string } }
  | {
      type: "content_block_delta";
      delta: { type: "text_delta"; text: string } | { type: "thinking_delta"; thinking: string };
    }
  | { type: "message_delta"; usage?: SDKUsage };

export interface SDKPartialAssistantMessage extends SDKLine {
  type: "stream_event";
  /** The API message the event belongs to, as the CLI names it beside the event. */
  api_message_id?: string;
  event: SDKStreamEvent;
}

/** `rate_limit_info`, passed on whole in the `rate_limit` event; system-lines.ts reads it. */
export type SDKRateLimitInfo = Json;

export interface SDKRateLimitEvent extends SDKLine {
  type: "rate_limit_event";
  rate_limit_info: SDKRateLimitInfo;
}

/** One model's share of a result: its context window and cost. */
export interface SDKModelUsage {
  /** 0 when not reported. */
  contextWindow: number;
  costUSD?: number;
}

/** The turn's end: success or the error subtypes (`error_max_turns`, `error_max_budget_usd`…). */
export interface SDKResultMessage extends SDKLine {
  type: "result";
  subtype?: string;
  is_error: boolean;
  result?: string;
  errors: string[];
  /** The HTTP status of the API error a failed turn ended on. */
  api_error_status?: number;
  duration_ms?: number;
  duration_api_ms: number;
  num_turns: number;
  usage: SDKUsage;
  modelUsage?: Record<string, SDKModelUsage>;
  /** This run's usage per model, on --resume where the totals are the session's. */
  model_usage_since_last_result?: Record<string, SDKModelUsage>;
  total_cost_usd?: number;
  /**
   * With `--json-schema`: the input of the model's valid StructuredOutput call; absent when it
   * never made one (the CLI still ends `success`).
   */
  structured_output?: unknown;
  /** The older CLIs' name of `total_cost_usd`. */
  cost_usd?: number;
}

/** A permission the CLI asks for (`--permission-prompt-tool stdio`). */
export interface SDKCanUseToolRequest {
  subtype: "can_use_tool";
  tool_name?: string;
  tool_use_id?: string;
  input: Json;
  permission_suggestions: unknown[];
  blocked_path?: string;
  decision_reason?: string;
  title?: string;
  description?: string;
}

/** A request of any other subtype, which the bridge refuses by its name (`requested`). */
export interface SDKOtherControlRequest {
  subtype: "other";
  requested: string;
}

export interface SDKControlRequest {
  type: "control_request";
  session_id?: string;
  request_id: string;
  request: SDKCanUseToolRequest | SDKOtherControlRequest;
}

export interface SDKControlCancelRequest {
  type: "control_cancel_request";
  session_id?: string;
  request_id: string;
}

/** What the bridge writes back to a control request. */
export interface SDKControlResponse {
  type: "control_response";
  response:
    | { subtype: "success"; request_id: string; response: Json }
    | { subtype: "error"; request_id: string; error: string };
}

/**
 * A line the mapper does not read (other system subtypes, keep-alives, control lines without a
 * request id…): only its session id counts.
 */
export interface SDKOtherMessage {
  type: "other";
  session_id?: string;
}

export type SDKMessage =
  | SDKSystemMessage
  | SDKAPIRetryMessage
  | SDKAssistantMessage
  | SDKUserMessage
  | SDKPartialAssistantMessage
  | SDKRateLimitEvent
  | SDKResultMessage
  | SDKControlRequest
  | SDKControlCancelRequest
  | SDKOtherMessage;
