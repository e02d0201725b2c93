import {
  type Attributes,
  context,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from "@opentelemetry/api";
import { ATTR_ERROR_TYPE } from "@opentelemetry/semantic-conventions";
import type { BridgeEvent, CompletionEvent } from "../events.js";
import type { RunSpanStart, RunTrace } from "./tracing.js";

// A run's spans, after the GenAI semantic conventions (agent spans): one `invoke_agent` span per
// run, and an `execute_tool` child from each tool call to its update. The GenAI names are
// written out here, as the semantic-conventions package asks of attributes still in development.
//
// Permission requests (issue 16) get spans of their own here too once a client can answer them:
// one from `permission_request` to its `permission_resolved`, under the tool call it is about.

const GEN_AI = {
  operation: "gen_ai.operation.name",
  provider: "gen_ai.provider.name",
  agentName: "gen_ai.agent.name",
  requestModel: "gen_ai.request.model",
  conversationId: "gen_ai.conversation.id",
  inputTokens: "gen_ai.usage.input_tokens",
  outputTokens: "gen_ai.usage.output_tokens",
  cacheReadTokens: "gen_ai.usage.cache_read.input_tokens",
  cacheCreationTokens: "gen_ai.usage.cache_creation.input_tokens",
  toolName: "gen_ai.tool.name",
  toolCallId: "gen_ai.tool.call.id",
} as const;

const PROVIDER: Partial<Record<string, string>> = { claude: "anthropic", codex: "openai" };

type ToolCallEvent = Extract<BridgeEvent, { type: "tool_call" }>;
type ToolUpdateEvent = Extract<BridgeEvent, { type: "tool_update" }>;

export function startRunTrace(tracer: Tracer, run: RunSpanStart): RunTrace {
  const parent = run.parent ?? ROOT_CONTEXT;
  const attributes: Attributes = {
    [GEN_AI.operation]: "invoke_agent",
    [GEN_AI.provider]: PROVIDER[run.agent] ?? run.agent,
    [GEN_AI.agentName]: run.agent,
    [GEN_AI.conversationId]: run.sessionId,
    "agent_bridge.run.id": run.runId,
    "agent_bridge.run.trigger": run.trigger,
  };
  if (run.model) attributes[GEN_AI.requestModel] = run.model;
  // CLIENT: the agent runs in a process of its own, the CLI.
  const span = tracer.startSpan(
    `invoke_agent ${run.agent}`,
    { kind: SpanKind.CLIENT, attributes },
    parent,
  );
  const runContext = trace.setSpan(parent, span);
  /** Tool calls not closed yet, by their tool_use_id. */
  const tools = new Map<string, Span>();

  const toolStarted = (event: ToolCallEvent) => {
    // A subagent's calls nest under the call (Task, Agent) that started it.
    const caller = event.parent_tool_use_id ? tools.get(event.parent_tool_use_id) : undefined;
    const toolSpan = tracer.startSpan(
      `execute_tool ${event.tool_name}`,
      {
        kind: SpanKind.INTERNAL,
        attributes: {
          [GEN_AI.operation]: "execute_tool",
          [GEN_AI.toolName]: event.tool_name,
          [GEN_AI.toolCallId]: event.tool_use_id,
          "agent_bridge.tool.kind": event.kind,
        },
      },
      caller ? trace.setSpan(runContext, caller) : runContext,
    );
    tools.set(event.tool_use_id, toolSpan);
  };

  const toolEnded = (event: ToolUpdateEvent) => {
    const toolSpan = tools.get(event.tool_use_id);
    if (!toolSpan) return;
    tools.delete(event.tool_use_id);
    if (event.status === "error") {
      toolSpan.setAttribute(ATTR_ERROR_TYPE, "tool_error");
      toolSpan.setStatus({ code: SpanStatusCode.ERROR });
    }
    toolSpan.end();
  };

  const completed = (event: CompletionEvent) => {
    // Calls the run ended before they did (a cancel, a timeout) end with it.
    for (const toolSpan of tools.values()) toolSpan.end();
    tools.clear();
    const { usage } = event;
    span.setAttributes({
      // The convention counts cached input in the input tokens; the bridge's usage does not.
      [GEN_AI.inputTokens]:
        usage.input_tokens + usage.cache_read_tokens + usage.cache_creation_tokens,
      [GEN_AI.outputTokens]: usage.output_tokens,
      [GEN_AI.cacheReadTokens]: usage.cache_read_tokens,
      [GEN_AI.cacheCreationTokens]: usage.cache_creation_tokens,
      "agent_bridge.run.status": event.status,
    });
    if (event.status !== "succeeded") {
      span.setAttribute(ATTR_ERROR_TYPE, event.error_code ?? event.status);
      span.setStatus({
        code: SpanStatusCode.ERROR,
        ...(event.error ? { message: event.error } : {}),
      });
    }
    span.end();
  };

  return {
    traceId: span.spanContext().traceId,
    within: (fn) => context.with(runContext, fn),
    observe(event) {
      if (event.type === "tool_call") toolStarted(event);
      else if (event.type === "tool_update") toolEnded(event);
      else if (event.type === "completion") completed(event);
    },
  };
}
