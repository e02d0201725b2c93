import { int, isRecord, type Json, str } from "../line-fields.js";
import type {
  SDKApiMessage,
  SDKContentBlock,
  SDKControlRequest,
  SDKMessage,
  SDKModelUsage,
  SDKStreamEvent,
  SDKToolResultBlock,
  SDKUsage,
} from "./sdk-messages.js";

// The boundary: one parsed stream-json line narrowed to its SDKMessage, once, on the hot path of
// every run. Plain checks on `type`/`subtype` and on the fields the bridge reads (no schema
// library per line); a field missing or of the wrong type is left out (or 0, for a count), as
// the mapper has always read it, and a line of no interest is `other`.

const strings = (value: unknown): string[] =>
  Array.isArray(value) ? value.filter((v): v is string => typeof v === "string") : [];

const num = (value: unknown): number | undefined => (typeof value === "number" ? value : undefined);

function usageOf(value: unknown): SDKUsage | undefined {
  if (!isRecord(value)) return undefined;
  return {
    input_tokens: int(value.input_tokens),
    output_tokens: int(value.output_tokens),
    cache_read_input_tokens: int(value.cache_read_input_tokens),
    cache_creation_input_tokens: int(value.cache_creation_input_tokens),
  };
}

const NO_USAGE: SDKUsage = {
  input_tokens: 0,
  output_tokens: 0,
  cache_read_input_tokens: 0,
  cache_creation_input_tokens: 0,
};

function apiMessageOf(value: Json): SDKApiMessage {
  return { id: str(value.id), model: str(value.model), usage: usageOf(value.usage) };
}

function contentBlocks(value: unknown): SDKContentBlock[] {
  if (!Array.isArray(value)) return [];
  const blocks: SDKContentBlock[] = [];
  for (const block of value) {
    if (!isRecord(block)) continue;
    if (block.type === "text" && typeof block.text === "string") {
      blocks.push({ type: "text", text: block.text });
    } else if (block.type === "thinking" && typeof block.thinking === "string") {
      blocks.push({ type: "thinking", thinking: block.thinking });
    } else if (block.type === "tool_use") {
      blocks.push({
        type: "tool_use",
        id: str(block.id),
        name: str(block.name),
        input: block.input,
      });
    }
  }
  return blocks;
}

function toolResults(content: unknown[]): SDKToolResultBlock[] {
  const results: SDKToolResultBlock[] = [];
  for (const block of content) {
    if (!isRecord(block) || block.type !== "tool_result") continue;
    const id = str(block.tool_use_id);
    if (!id) continue;
    results.push({
      type: "tool_result",
      tool_use_id: id,
      is_error: block.is_error === true,
      content: block.content,
    });
  }
  return results;
}

function streamEvent(event: Json): SDKStreamEvent | undefined {
  switch (event.type) {
    case "message_start":
      return {
        type: "message_start",
        message: apiMessageOf(isRecord(event.message) ? event.message : {}),
      };
    case "content_block_start": {
      const block = isRecord(event.content_block) ? event.content_block : {};
      return {
        type: "content_block_start",
        content_block: { type: str(block.type), id: str(block.id), name: str(block.name) },
      };
    }
    case "content_block_delta": {
      const delta = isRecord(event.delta) ? event.delta : {};
      if (delta.type === "text_delta" && typeof delta.text === "string" && delta.text) {
        return { type: "content_block_delta", delta: { type: "text_delta", text: delta.text } };
      }
      if (delta.type === "thinking_delta" && typeof delta.thinking === "string" && delta.thinking) {
        return {
          type: "content_block_delta",
          delta: { type: "thinking_delta", thinking: delta.thinking },
        };
      }
      return undefined;
    }
    case "message_delta":
      return { type: "message_delta", usage: usageOf(event.usage) };
    default:
      return undefined;
  }
}

/** Each model's context window and cost, from a result's `modelUsage` or its like. */
function modelUsages(value: unknown): Record<string, SDKModelUsage> | undefined {
  if (!isRecord(value)) return undefined;
  const usages: Record<string, SDKModelUsage> = {};
  for (const model in value) {
    const m = value[model];
    // No model is called so; assigning it would set the object's prototype.
    if (!isRecord(m) || model === "__proto__") continue;
    const cost = m.costUSD;
    usages[model] = {
      contextWindow: int(m.contextWindow),
      costUSD: typeof cost === "number" && Number.isFinite(cost) ? cost : undefined,
    };
  }
  return usages;
}

/** A control request's `request`: a permission (`can_use_tool`) in full, else its subtype. */
function controlRequestOf(value: unknown): SDKControlRequest["request"] {
  const request = isRecord(value) ? value : {};
  if (request.subtype !== "can_use_tool")
    return { subtype: "other", requested: String(request.subtype) };
  return {
    subtype: "can_use_tool",
    tool_name: str(request.tool_name),
    tool_use_id: str(request.tool_use_id),
    input: isRecord(request.input) ? request.input : {},
    permission_suggestions: Array.isArray(request.permission_suggestions)
      ? request.permission_suggestions
      : [],
    blocked_path: str(request.blocked_path),
    decision_reason: str(request.decision_reason),
    title: str(request.title),
    description: str(request.description),
  };
}

/** The info of a `rate_limit_event`: older CLIs put it on the line itself. */
function rateLimitInfo(line: Json): Json {
  if (isRecord(line.rate_limit_info)) return line.rate_limit_info;
  const { type: _type, uuid: _uuid, session_id: _sid, ...rest } = line;
  return rest;
}

/** The SDKMessage a parsed line is. */
export function readLine(line: Json): SDKMessage {
  const session_id = str(line.session_id);
  const parent_tool_use_id = str(line.parent_tool_use_id) ?? null;
  switch (line.type) {
    case "stream_event": {
      const event = isRecord(line.event) ? streamEvent(line.event) : undefined;
      if (event === undefined) break;
      return {
        type: "stream_event",
        session_id,
        parent_tool_use_id,
        api_message_id: str(line.api_message_id),
        event,
      };
    }
    case "assistant": {
      const message = isRecord(line.message) ? line.message : {};
      return {
        type: "assistant",
        session_id,
        parent_tool_use_id,
        uuid: str(line.uuid),
        message: {
          id: str(message.id),
          model: str(message.model),
          usage: usageOf(message.usage),
          content: contentBlocks(message.content),
        },
        is_api_error_message: line.is_api_error_message === true,
        error: str(line.error),
      };
    }
    case "user": {
      const content = isRecord(line.message) ? line.message.content : undefined;
      return {
        type: "user",
        session_id,
        parent_tool_use_id,
        uuid: str(line.uuid),
        message: {
          content:
            typeof content === "string"
              ? content
              : Array.isArray(content)
                ? toolResults(content)
                : undefined,
        },
        tool_use_result: line.tool_use_result,
        isReplay: line.isReplay === true,
        isSynthetic: line.isSynthetic === true,
      };
    }
    case "rate_limit_event":
      return {
        type: "rate_limit_event",
        session_id,
        parent_tool_use_id,
        rate_limit_info: rateLimitInfo(line),
      };
    case "system":
      if (line.subtype === "init") {
        const servers = Array.isArray(line.mcp_servers) ? line.mcp_servers.filter(isRecord) : [];
        return {
          type: "system",
          subtype: "init",
          session_id,
          parent_tool_use_id,
          model: str(line.model),
          cwd: str(line.cwd),
          tools: strings(line.tools),
          mcp_servers: servers.flatMap((s) => {
            const name = str(s.name);
            return name === undefined ? [] : [{ name, status: str(s.status) }];
          }),
          slash_commands: strings(line.slash_commands),
        };
      }
      if (line.subtype === "api_retry") {
        return {
          type: "system",
          subtype: "api_retry",
          session_id,
          parent_tool_use_id,
          attempt: int(line.attempt),
          max_retries: int(line.max_retries),
          retry_delay_ms: int(line.retry_delay_ms),
          error_status: num(line.error_status),
          error: str(line.error),
        };
      }
      break;
    case "result":
      return {
        type: "result",
        session_id,
        parent_tool_use_id,
        subtype: str(line.subtype),
        is_error: line.is_error === true,
        result: str(line.result),
        errors: strings(line.errors),
        api_error_status: num(line.api_error_status),
        duration_ms: typeof line.duration_ms === "number" ? int(line.duration_ms) : undefined,
        duration_api_ms: int(line.duration_api_ms),
        num_turns: int(line.num_turns),
        usage: usageOf(line.usage) ?? NO_USAGE,
        modelUsage: modelUsages(line.modelUsage),
        model_usage_since_last_result: modelUsages(line.model_usage_since_last_result),
        total_cost_usd: num(line.total_cost_usd),
        cost_usd: num(line.cost_usd),
        ...("structured_output" in line ? { structured_output: line.structured_output } : {}),
      };
    case "control_request":
      if (typeof line.request_id !== "string") break;
      return {
        type: "control_request",
        session_id,
        request_id: line.request_id,
        request: controlRequestOf(line.request),
      };
    case "control_cancel_request":
      if (typeof line.request_id !== "string") break;
      return { type: "control_cancel_request", session_id, request_id: line.request_id };
  }
  return { type: "other", session_id };
}
