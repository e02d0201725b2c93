import { z } from "@hono/zod-openapi";
import { Effort, PermissionMode } from "../../../claude/options.js";
import { SessionUsage } from "../../../events.js";
import type { SessionRow } from "../../../store/schema.js";

export const SessionId = z.uuid({ error: "expected a session id (a UUID)" }).openapi({
  param: { name: "id", in: "path" },
  example: "0b6a2f7e-3c1d-4a53-9d8e-2f1c6b7a9e10",
});

export const CreateSessionBody = z
  .strictObject({
    title: z.string().min(1).max(200).optional().openapi({ description: "A label for people." }),
    permission_mode: PermissionMode.optional().openapi({
      description:
        "How the agent may use tools. Default: the server's `AGENT_BRIDGE_CLAUDE_PERMISSION_MODE`.",
    }),
    model: z
      .string()
      .min(1)
      .max(200)
      .regex(/^[A-Za-z0-9._:\-[\]/]+$/, { error: "expected a model name or alias, e.g. sonnet" })
      .optional()
      .openapi({
        description: "Model name or alias. Default: the CLI's (or `AGENT_BRIDGE_CLAUDE_MODEL`).",
      }),
    effort: Effort.optional().openapi({ description: "Default: `AGENT_BRIDGE_CLAUDE_EFFORT`." }),
    system_prompt: z
      .string()
      .min(1)
      .max(100_000)
      .optional()
      .openapi({ description: "Appended to the CLI's system prompt on every run of the session." }),
    worktree: z.boolean().optional().openapi({
      description:
        "Run in a git worktree of its own. Default: `AGENT_BRIDGE_CLAUDE_WORKTREE_ENABLED`.",
    }),
    metadata: z
      .record(z.string().min(1).max(64), z.string().max(512))
      .refine((m) => Object.keys(m).length <= 32, { error: "at most 32 metadata keys" })
      .optional()
      .openapi({ description: "Up to 32 string pairs, stored and returned as given." }),
  })
  .openapi("CreateSession");

export const Session = z
  .object({
    id: z.string().openapi({ description: "Also the Claude Code CLI's session id." }),
    title: z.string().nullable(),
    permission_mode: PermissionMode,
    model: z.string().nullable().openapi({ description: "null: the CLI's default model." }),
    effort: Effort,
    system_prompt: z.string().nullable(),
    worktree: z.boolean(),
    metadata: z.record(z.string(), z.string()),
    created_at: z.string().openapi({ format: "date-time" }),
    updated_at: z.string().openapi({ format: "date-time" }),
    last_activity_at: z.string().openapi({ format: "date-time" }),
    usage: SessionUsage,
  })
  .openapi("Session");
export type Session = z.infer<typeof Session>;

export const ListSessionsQuery = z.strictObject({
  limit: z.coerce
    .number({ error: "expected a whole number from 1 to 100" })
    .int({ error: "expected a whole number from 1 to 100" })
    .min(1, { error: "expected a whole number from 1 to 100" })
    .max(100, { error: "expected a whole number from 1 to 100" })
    .default(20)
    .openapi({ param: { name: "limit", in: "query" }, example: 20 }),
  cursor: z
    .string()
    .max(200)
    .optional()
    .openapi({
      param: { name: "cursor", in: "query" },
      description: "`next_cursor` of the previous page.",
    }),
});

export const SessionPage = z
  .object({
    data: z.array(Session),
    next_cursor: z.string().nullable().openapi({ description: "null on the last page." }),
  })
  .openapi("SessionPage");

export function toSession(row: SessionRow): Session {
  return {
    id: row.id,
    title: row.title,
    permission_mode: PermissionMode.parse(row.permissionMode),
    model: row.model,
    effort: Effort.parse(row.effort),
    system_prompt: row.systemPrompt,
    worktree: row.worktree,
    metadata: row.metadata,
    created_at: row.createdAt.toISOString(),
    updated_at: row.updatedAt.toISOString(),
    last_activity_at: row.lastActivityAt.toISOString(),
    usage: {
      input_tokens: row.inputTokens,
      output_tokens: row.outputTokens,
      cache_read_tokens: row.cacheReadTokens,
      cache_creation_tokens: row.cacheCreationTokens,
      cost_usd: row.costUsd,
      num_turns: row.numTurns,
      runs: row.runs,
    },
  };
}
