import { z } from "@hono/zod-openapi";
import {
  type BridgeEvent,
  CompletionErrorCode,
  type CompletionEvent,
  CompletionStatus,
} from "../events.js";
import { COST_PRECISION } from "../money.js";
import type { SequencedEvent } from "../store/events.js";
import { OPEN_STATUSES } from "../store/runs.js";
import type { RunRow } from "../store/schema.js";
import { ToolKind } from "../tool-calls.js";

// A session's conversation as items (`GET /v1/sessions/{id}/messages`), derived from what is
// stored and nothing else: each run's row (its message) and its event log (what the agent said
// and did, and how the run ended). Nothing here is a second copy that could drift from the log.

const common = {
  run_id: z.string(),
  seq: z.number().int().openapi({
    description:
      "The `seq` of the run's event the item comes from (its first, for text; `?events=full` numbering); 0 for the user's message, which comes from the run itself.",
  }),
  live: z.boolean().openapi({
    description:
      "The run has not finished: the item holds what its log holds so far (text may grow, an outcome or answer may still come).",
  }),
};

export const ConversationImage = z
  .object({
    name: z.string().openapi({ example: "image-1.png" }),
    media_type: z.string().openapi({ example: "image/png" }),
    size_bytes: z.number().int(),
  })
  .openapi("ConversationImage", {
    description: "An image the message carried: named and measured; its bytes are never stored.",
  });

export const UserMessageItem = z
  .object({
    type: z.literal("user_message"),
    ...common,
    text: z.string().openapi({ description: "The run's prompt." }),
    images: z.array(ConversationImage),
    trigger: z.string().openapi({
      description:
        "Who sent it (the run's `trigger`): `message` (POST …/messages), `retry` (POST /v1/runs/{id}/retry), `webhook` (a hook's delivery) or `schedule` (a hook's schedule).",
      example: "message",
    }),
    created_at: z.string().openapi({ format: "date-time" }),
  })
  .openapi("UserMessageItem");

export const AssistantTextItem = z
  .object({ type: z.literal("assistant_text"), ...common, text: z.string() })
  .openapi("AssistantTextItem", {
    description:
      "What the agent said to the user between two other items: its `text_delta` events joined.",
  });

export const ToolCallItem = z
  .object({
    type: z.literal("tool_call"),
    ...common,
    tool_use_id: z.string(),
    tool_name: z.string(),
    kind: ToolKind,
    input: z.unknown(),
    parent_tool_use_id: z.string().nullable().openapi({
      description: "The subagent's tool call this call was made in; null on the main thread.",
    }),
    result: z
      .object({
        seq: z.number().int(),
        is_error: z.boolean(),
        content: z.string(),
        truncated: z.boolean(),
      })
      .nullable()
      .openapi({
        description:
          "Its `tool_result`, as stored (content cut to a bound, with `truncated`); null while it runs, and for a call that never got one.",
      }),
  })
  .openapi("ToolCallItem");

export const PermissionItem = z
  .object({
    type: z.literal("permission"),
    ...common,
    request_id: z.string(),
    tool_name: z.string(),
    tool_use_id: z.string().nullable(),
    input: z.record(z.string(), z.unknown()),
    answer: z
      .object({
        seq: z.number().int(),
        decision: z.enum(["allow", "deny", "withdrawn"]).openapi({
          description: "`withdrawn`: the agent withdrew the request (`permission_cancelled`).",
        }),
        by: z.enum(["client", "timeout", "policy", "cancel", "agent"]),
        scope: z.enum(["once", "session"]).optional(),
        message: z.string().optional(),
      })
      .nullable()
      .openapi({ description: "Its `permission_resolved`; null while it waits." }),
  })
  .openapi("PermissionItem", { description: "A `permission_request` and its answer." });

export const RunEndItem = z
  .object({
    type: z.literal("run_end"),
    ...common,
    status: CompletionStatus,
    error_code: CompletionErrorCode.nullable(),
    error: z.string().nullable(),
    cost_usd: z
      .number()
      .nullable()
      .openapi({ description: `As the run's completion says. ${COST_PRECISION}` }),
  })
  .openapi("RunEndItem", { description: "The run's `completion`." });

export const UserInputItem = z
  .object({
    type: z.literal("user_input"),
    ...common,
    input_id: z.string(),
    text: z.string(),
    image_count: z.number().int().openapi({
      description: "How many images came with it (their bytes are never stored, nor named).",
    }),
  })
  .openapi("UserInputItem", {
    description:
      "The user's next message, written into the live run (`POST /v1/runs/{id}/input`): its `user_input` event, where the log holds it (when it was sent; the agent answers it after the turn then in progress).",
  });

export const ControlItem = z
  .object({
    type: z.literal("control"),
    ...common,
    control_id: z.string(),
    model: z.string().nullable().openapi({
      description: "The model the agent switched to (as it named it); null if unchanged.",
    }),
    permission_mode: z.string().nullable().openapi({
      description: "The permission mode it switched to; null if unchanged.",
    }),
  })
  .openapi("ControlItem", {
    description:
      "A switch of the live run's model or permission mode (`POST /v1/runs/{id}/control`): its `control` event.",
  });

export const ConversationItem = z
  .discriminatedUnion("type", [
    UserMessageItem,
    AssistantTextItem,
    ToolCallItem,
    PermissionItem,
    RunEndItem,
    UserInputItem,
    ControlItem,
  ])
  .openapi("ConversationItem");
export type ConversationItem = z.infer<typeof ConversationItem>;

type EventOf<T extends BridgeEvent["type"]> = Extract<BridgeEvent, { type: T }>;

/** Events that end an assistant text: whatever comes between two of the agent's texts. */
const BREAKS_TEXT = new Set<string>([
  "tool_call",
  "tool_result",
  "permission_request",
  "permission_resolved",
  "permission_cancelled",
  "completion",
  // The user speaks or switches: what the agent says next is another text.
  "user_input",
  "control",
]);

/**
 * The run's items, in its log's order: its message, then from its events (all of them, in
 * order, from seq 1). Events that are not part of the conversation (status, reasoning, context
 * window…) are skipped, and so are event types this code does not know.
 */
export function runItems(run: RunRow, events: Iterable<SequencedEvent>): ConversationItem[] {
  const live = OPEN_STATUSES.includes(run.status);
  const base = { run_id: run.id, live };
  const items: ConversationItem[] = [
    {
      type: "user_message",
      ...base,
      seq: 0,
      text: run.prompt,
      images: run.images ?? [],
      trigger: run.trigger,
      created_at: run.createdAt.toISOString(),
    },
  ];
  const calls = new Map<string, Extract<ConversationItem, { type: "tool_call" }>>();
  const requests = new Map<string, Extract<ConversationItem, { type: "permission" }>>();
  let text: Extract<ConversationItem, { type: "assistant_text" }> | undefined;
  for (const event of events) {
    if (BREAKS_TEXT.has(event.type)) text = undefined;
    switch (event.type) {
      case "text_delta": {
        const delta = (JSON.parse(event.json) as { text: string }).text;
        if (text) text.text += delta;
        else {
          text = { type: "assistant_text", ...base, seq: event.seq, text: delta };
          items.push(text);
        }
        break;
      }
      case "tool_call": {
        const e = JSON.parse(event.json) as EventOf<"tool_call">;
        const item = {
          type: "tool_call" as const,
          ...base,
          seq: event.seq,
          tool_use_id: e.tool_use_id,
          tool_name: e.tool_name,
          kind: e.kind,
          input: e.input,
          parent_tool_use_id: e.parent_tool_use_id ?? null,
          result: null,
        };
        calls.set(e.tool_use_id, item);
        items.push(item);
        break;
      }
      case "tool_result": {
        const e = JSON.parse(event.json) as EventOf<"tool_result">;
        const call = calls.get(e.tool_use_id);
        if (call && !call.result) {
          call.result = {
            seq: event.seq,
            is_error: e.is_error,
            content: e.content,
            truncated: e.truncated,
          };
        }
        break;
      }
      case "permission_request": {
        const e = JSON.parse(event.json) as EventOf<"permission_request">;
        const item = {
          type: "permission" as const,
          ...base,
          seq: event.seq,
          request_id: e.request_id,
          tool_name: e.tool_name,
          tool_use_id: e.tool_use_id,
          input: e.input,
          answer: null,
        };
        requests.set(e.request_id, item);
        items.push(item);
        break;
      }
      case "permission_resolved": {
        const e = JSON.parse(event.json) as EventOf<"permission_resolved">;
        const request = requests.get(e.request_id);
        if (request && !request.answer) {
          request.answer = {
            seq: event.seq,
            decision: e.decision,
            by: e.by,
            ...(e.scope === undefined ? {} : { scope: e.scope }),
            ...(e.message === undefined ? {} : { message: e.message }),
          };
        }
        break;
      }
      case "permission_cancelled": {
        const { request_id } = JSON.parse(event.json) as { request_id: string };
        const request = requests.get(request_id);
        if (request && !request.answer) {
          request.answer = { seq: event.seq, decision: "withdrawn", by: "agent" };
        }
        break;
      }
      case "user_input": {
        const e = JSON.parse(event.json) as EventOf<"user_input">;
        items.push({
          type: "user_input",
          ...base,
          seq: event.seq,
          input_id: e.input_id,
          text: e.text,
          image_count: e.images ?? 0,
        });
        break;
      }
      case "control": {
        const e = JSON.parse(event.json) as EventOf<"control">;
        items.push({
          type: "control",
          ...base,
          seq: event.seq,
          control_id: e.control_id,
          model: e.model ?? null,
          permission_mode: e.permission_mode ?? null,
        });
        break;
      }
      case "completion": {
        const e = JSON.parse(event.json) as CompletionEvent;
        items.push({
          type: "run_end",
          ...base,
          seq: event.seq,
          status: e.status,
          error_code: e.error_code ?? null,
          error: e.error,
          cost_usd: e.cost_usd,
        });
        break;
      }
    }
  }
  return items;
}
