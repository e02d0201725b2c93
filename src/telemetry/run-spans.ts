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
import { startEventSpans } from "./event-spans.js";
import type { RunSpanStart, RunTrace } from "./tracing.js";

// A run's spans, after the GenAI semantic conventions (agent spans): one `invoke_agent` span per
// run, an `execute_tool` child from each tool call to its update, and a `permission` span from
// each permission request to its answer (or withdrawal), under the tool call it is about: how
// long a run waited for a person shows as such. The GenAI names are written out here, as the
// semantic-conventions package asks of attributes still in development.

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
type PermissionRequestEvent = Extract<BridgeEvent, { type: "permission_request" }>;
type PermissionEndEvent = Extract<
  BridgeEvent,
  { type: "permission_resolved" } | { type: "permission_cancelled" }
>;

/** The run's span; with `events`, each turn's events get spans of their own (event-spans.ts). */
export function startRunTrace(tracer: Tracer, run: RunSpanStart, events = false): RunTrace {
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
  const exchange = events ? startEventSpans(tracer, runContext) : undefined;
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

  /** Permission requests not answered yet, by their request_id. */
  const permissions = new Map<string, Span>();

  const permissionAsked = (event: PermissionRequestEvent) => {
    const tool = event.tool_use_id ? tools.get(event.tool_use_id) : undefined;
    const permissionSpan = tracer.startSpan(
      `permission ${event.tool_name}`,
      {
        kind: SpanKind.INTERNAL,
        attributes: {
          [GEN_AI.toolName]: event.tool_name,
          ...(event.tool_use_id ? { [GEN_AI.toolCallId]: event.tool_use_id } : {}),
          "agent_bridge.permission.request_id": event.request_id,
        },
      },
      tool ? trace.setSpan(runContext, tool) : runContext,
    );
    permissions.set(event.request_id, permissionSpan);
  };

  const permissionEnded = (event: PermissionEndEvent) => {
    const permissionSpan = permissions.get(event.request_id);
    if (!permissionSpan) return;
    permissions.delete(event.request_id);
    permissionSpan.setAttributes(
      event.type === "permission_cancelled"
        ? { "agent_bridge.permission.decision": "withdrawn" }
        : {
            "agent_bridge.permission.decision": event.decision,
            "agent_bridge.permission.by": event.by,
            ...(event.scope ? { "agent_bridge.permission.scope": event.scope } : {}),
          },
    );
    permissionSpan.end();
  };

  const completed = (event: CompletionEvent) => {
    exchange?.ended(event);
    // Calls and requests the run ended before they did (a cancel, a timeout) end with it.
    for (const open of [...tools.values(), ...permissions.values()]) open.end();
    tools.clear();
    permissions.clear();
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
    ...(exchange ? { exchange } : {}),
    observe(event) {
      if (event.type === "tool_call") toolStarted(event);
      else if (event.type === "tool_update") toolEnded(event);
      else if (event.type === "permission_request") permissionAsked(event);
      else if (event.type === "permission_resolved" || event.type === "permission_cancelled")
        permissionEnded(event);
      else if (event.type === "completion") completed(event);
    },
  };
}
