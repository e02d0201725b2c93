import { z } from "@hono/zod-openapi";
import { changedInput, PERMISSION_STATES } from "../../../store/permissions.js";
import type { PermissionRequestRow } from "../../../store/schema.js";

export const RequestId = z
  .string()
  .min(1)
  .max(200)
  .openapi({
    param: { name: "request_id", in: "path" },
    description: "The `request_id` of a `permission_request` event.",
  });

export const AnswerPermissionBody = z
  .union([
    z.strictObject({
      decision: z.enum(["allow", "deny"]),
      scope: z.enum(["once", "session"]).optional().openapi({
        description:
          "`session`: allow the same for the rest of the session: the agent's suggested rules (or the tool) are added for this run's CLI and, as `--allowedTools`, for the session's later runs. Default `once`.",
      }),
      updated_input: z.record(z.string(), z.unknown()).optional().openapi({
        description: "With `allow`: the tool runs with this input instead of the one asked for.",
      }),
      message: z.string().min(1).max(10_000).optional().openapi({
        description: "With `deny`: what the model is told.",
      }),
      interrupt: z.boolean().optional().openapi({ description: "With `deny`: also end the turn." }),
    }),
    z.strictObject({
      answers: z.record(z.string(), z.union([z.string(), z.array(z.string())])).openapi({
        description:
          'For an `AskUserQuestion` request: each question\'s text to the chosen option\'s label (a list for a multi-select question), or free text. E.g. `{"Which approach?": "B"}`.',
      }),
    }),
  ])
  .openapi("AnswerPermission");

export const PermissionRequestInfo = z
  .object({
    request_id: z.string(),
    tool_name: z.string(),
    tool_use_id: z.string().nullable(),
    input: z.record(z.string(), z.unknown()),
    suggestions: z.array(z.unknown()),
    state: z.enum(PERMISSION_STATES).openapi({
      description:
        "`pending` until answered (`allowed`, `denied`), timed out (`expired`) or withdrawn by the agent or closed by the run's end (`cancelled`).",
    }),
    by: z.enum(["client", "timeout", "cancel"]).nullable(),
    key_id: z.string().nullable().openapi({
      description:
        "With `by: client`: the id of the API key that answered (see `GET /v1/keys`); null otherwise, and when the server runs without keys.",
    }),
    scope: z.enum(["once", "session"]).nullable(),
    updated_input: z.record(z.string(), z.unknown()).optional().openapi({
      description:
        "When `allowed`: the input the tool was allowed to run with, when the answer changed `input` (`updated_input`, or a question's `answers`); absent when it runs as asked.",
    }),
    created_at: z.string().openapi({ format: "date-time" }),
    expires_at: z.string().openapi({ format: "date-time" }),
    answered_at: z.string().nullable().openapi({ format: "date-time" }),
  })
  .openapi("PermissionRequest");

export const PermissionRequestList = z
  .object({ data: z.array(PermissionRequestInfo) })
  .openapi("PermissionRequestList");

export function toPermissionRequest(
  row: PermissionRequestRow,
): z.infer<typeof PermissionRequestInfo> {
  const updated = changedInput(row);
  return {
    request_id: row.requestId,
    tool_name: row.toolName,
    tool_use_id: row.toolUseId,
    input: row.input,
    suggestions: row.suggestions,
    state: z.enum(PERMISSION_STATES).parse(row.state),
    by: row.by === null ? null : z.enum(["client", "timeout", "cancel"]).parse(row.by),
    key_id: row.answeredByKeyId,
    scope: row.scope === null ? null : z.enum(["once", "session"]).parse(row.scope),
    ...(updated ? { updated_input: updated } : {}),
    created_at: row.createdAt.toISOString(),
    expires_at: row.expiresAt.toISOString(),
    answered_at: row.answeredAt?.toISOString() ?? null,
  };
}
