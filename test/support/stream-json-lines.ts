// Builders for stream-json lines shaped like the real CLI's (2.1.328), for mapper tests and the
// fake CLI's scenarios. Only the fields the bridge reads, plus enough to look real.

type Json = Record<string, unknown>;

export const SESSION_ID = "11111111-2222-3333-4444-555555555555";

export function systemInit(sessionId = SESSION_ID): Json {
  return {
    type: "system",
    subtype: "init",
    cwd: "/tmp/work",
    session_id: sessionId,
    tools: ["Bash", "AskUserQuestion"],
    model: "claude-test",
    permissionMode: "default",
  };
}

interface Scope {
  parent?: string | null;
}

export function streamEvent(messageId: string, event: Json, opts: Scope = {}): Json {
  return {
    type: "stream_event",
    event,
    session_id: SESSION_ID,
    parent_tool_use_id: opts.parent ?? null,
    uuid: `se-${Math.random().toString(16).slice(2)}`,
    api_message_id: messageId,
  };
}

export function messageStart(
  messageId: string,
  usage: Json = { input_tokens: 100, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 },
  opts: Scope = {},
): Json {
  return streamEvent(
    messageId,
    {
      type: "message_start",
      message: {
        id: messageId,
        type: "message",
        role: "assistant",
        model: "claude-test",
        content: [],
        usage,
      },
    },
    opts,
  );
}

export function textDelta(messageId: string, index: number, text: string, opts: Scope = {}): Json {
  return streamEvent(
    messageId,
    { type: "content_block_delta", index, delta: { type: "text_delta", text } },
    opts,
  );
}

export function thinkingDelta(messageId: string, index: number, thinking: string): Json {
  return streamEvent(messageId, {
    type: "content_block_delta",
    index,
    delta: { type: "thinking_delta", thinking },
  });
}

export function toolUseStart(
  messageId: string,
  index: number,
  id: string,
  name: string,
  opts: Scope = {},
): Json {
  return streamEvent(
    messageId,
    {
      type: "content_block_start",
      index,
      content_block: { type: "tool_use", id, name, input: {} },
    },
    opts,
  );
}

export function assistant(
  messageId: string,
  content: Json[],
  opts: Scope & { uuid?: string; usage?: Json; model?: string } = {},
): Json {
  return {
    type: "assistant",
    message: {
      id: messageId,
      type: "message",
      role: "assistant",
      model: opts.model ?? "claude-test",
      content,
      usage: opts.usage ?? {
        input_tokens: 100,
        cache_read_input_tokens: 0,
        cache_creation_input_tokens: 0,
        output_tokens: 1,
      },
    },
    parent_tool_use_id: opts.parent ?? null,
    session_id: SESSION_ID,
    uuid: opts.uuid ?? `a-${messageId}`,
  };
}

export function toolUse(id: string, name: string, input: Json): Json {
  return { type: "tool_use", id, name, input };
}

export function toolResult(
  toolUseId: string,
  content: unknown,
  opts: Scope & { isError?: boolean; uuid?: string } = {},
): Json {
  return {
    type: "user",
    message: {
      role: "user",
      content: [
        { type: "tool_result", tool_use_id: toolUseId, content, is_error: opts.isError ?? false },
      ],
    },
    parent_tool_use_id: opts.parent ?? null,
    session_id: SESSION_ID,
    uuid: opts.uuid ?? `u-${toolUseId}`,
  };
}

export function result(overrides: Json = {}): Json {
  return {
    type: "result",
    subtype: "success",
    is_error: false,
    duration_ms: 1234,
    duration_api_ms: 1000,
    num_turns: 1,
    result: "Done.",
    session_id: SESSION_ID,
    total_cost_usd: 0.0123,
    usage: {
      input_tokens: 100,
      cache_creation_input_tokens: 5,
      cache_read_input_tokens: 7,
      output_tokens: 20,
    },
    modelUsage: { "claude-test": { contextWindow: 200_000 } },
    permission_denials: [],
    uuid: "result-uuid",
    ...overrides,
  };
}

export function controlRequest(
  requestId: string,
  toolName: string,
  input: Json,
  toolUseId: string,
): Json {
  return {
    type: "control_request",
    request_id: requestId,
    request: {
      subtype: "can_use_tool",
      tool_name: toolName,
      display_name: toolName,
      input,
      tool_use_id: toolUseId,
      ...(toolName === "AskUserQuestion" ? { requires_user_interaction: true } : {}),
    },
  };
}

export const QUESTION_INPUT = {
  questions: [
    {
      question: "Which approach?",
      header: "Approach",
      options: [
        { label: "A", description: "first" },
        { label: "B", description: "second" },
      ],
      multiSelect: false,
    },
  ],
};

/** A whole streamed text turn: message_start, deltas, the assistant block, as the CLI writes it. */
export function streamedText(
  messageId: string,
  parts: string[],
  opts: Scope & { uuid?: string } = {},
): Json[] {
  return [
    messageStart(messageId, undefined, opts),
    streamEvent(
      messageId,
      { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
      opts,
    ),
    ...parts.map((p) => textDelta(messageId, 0, p, opts)),
    assistant(messageId, [{ type: "text", text: parts.join("") }], opts),
    streamEvent(messageId, { type: "content_block_stop", index: 0 }, opts),
  ];
}
