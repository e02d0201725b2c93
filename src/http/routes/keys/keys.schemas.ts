import { z } from "@hono/zod-openapi";
import { type KeyPolicy, policyOf } from "../../../auth/policy.js";
import type { Config } from "../../../config.js";
import { PermissionMode } from "../../../session-settings.js";
import type { ApiKeyRow } from "../../../store/schema.js";
import { ToolRules } from "../../../tool-rules.js";

export const KeyId = z.uuid({ error: "expected a key id (a UUID)" }).openapi({
  param: { name: "id", in: "path" },
});

/** What a key's sessions and hooks may ask for; each field may be left out to keep it as it is. */
const policyFields = {
  permission_modes: z.array(PermissionMode).min(1).max(16).nullable().optional().openapi({
    description:
      "Permission modes its sessions and hooks may use; null: the default, every mode for an admin key and every mode but `bypassPermissions` and `dangerously-skip-permissions` otherwise.",
  }),
  work_roots: z.array(z.string().min(1).max(4096)).min(1).max(32).nullable().optional().openapi({
    description:
      "Directories a session's work dir must lie in, each inside `AGENT_BRIDGE_ALLOWED_ROOTS` (stored as real paths); null: the server's allowed roots.",
  }),
  max_budget_usd: z.number().min(0).max(1_000_000).nullable().optional().openapi({
    description:
      "What its runs may cost per calendar month (UTC), in USD; null: no cap. A message or hook run that would start past it gets 402 `budget_exhausted`.",
  }),
  worktrees: z
    .boolean()
    .optional()
    .openapi({ description: "Whether its sessions may run in a git worktree (default true)." }),
  egress: z
    .array(z.string().min(1).max(260))
    .max(64)
    .optional()
    .openapi({
      description:
        "Where its agents may connect from their sandbox, through the bridge's proxy (the sandbox has no other way out but the model API): each entry `host`, `*.host` (the names under it), an IP address (`[v6]` in brackets), or `*` (any host), with `:port` or without (then 80 and 443). A name reaches only global unicast addresses; an address written here is reached as written, loopback or private too. Default `[]`: nothing.",
      example: ["github.com", "*.npmjs.org", "registry.npmjs.org:443"],
    }),
  models: z
    .array(z.string().trim().min(1).max(200))
    .min(1)
    .max(64)
    .nullable()
    .optional()
    .openapi({
      description:
        "The models its runs may call through the model gateway, by the name a request gives (`claude-opus-5-5`); a call for another is refused with the API's 403 and its run ends `policy_denied`. null (the default): any.",
      example: ["claude-opus-5-5", "claude-haiku-4-5"],
    }),
  tool_rules: ToolRules.optional().openapi({
    description:
      "Rules of its agents' tool uses, checked before a session's own, in every permission mode (bypass too); see docs/api.md#tool-rules. A Claude Code session only: a codex session of a key with rules cannot run. Default `[]`.",
    example: [{ tool: "Bash", command: "rm *", decision: "ask" }],
  }),
};

export const CreateKeyBody = z
  .strictObject({
    name: z.string().min(1).max(100).openapi({ example: "ci" }),
    admin: z
      .boolean()
      .default(false)
      .openapi({ description: "Admin keys see every tenant and manage keys." }),
    ...policyFields,
  })
  .openapi("CreateApiKey");

export const UpdateKeyBody = z
  .strictObject(policyFields)
  .openapi("UpdateApiKey", { description: "Fields left out stay as they are." });

export const ApiKey = z
  .object({
    id: z.string(),
    name: z.string(),
    prefix: z.string().openapi({
      description: "The key's first characters, to recognise it.",
      example: "ab_x7Kq2m",
    }),
    admin: z.boolean(),
    created_at: z.string().openapi({ format: "date-time" }),
    last_used_at: z.string().nullable().openapi({ format: "date-time" }),
    revoked_at: z.string().nullable().openapi({ format: "date-time" }),
    permission_modes: z.array(PermissionMode).openapi({
      description: "The permission modes its sessions and hooks may use (defaults filled in).",
    }),
    work_roots: z
      .array(z.string())
      .openapi({ description: "Where its sessions may work (defaults filled in)." }),
    max_budget_usd: z
      .number()
      .nullable()
      .openapi({ description: "Monthly (UTC) spending cap in USD; null: none." }),
    worktrees: z.boolean().openapi({ description: "Whether its sessions may use worktree mode." }),
    egress: z.array(z.string()).openapi({
      description: "Where its sandboxed agents may connect, through the bridge's proxy.",
    }),
    models: z
      .array(z.string())
      .nullable()
      .openapi({ description: "The models its runs may call; null: any." }),
    tool_rules: ToolRules,
  })
  .openapi("ApiKey");

export const NewApiKey = ApiKey.extend({
  key: z
    .string()
    .openapi({ description: "The key itself: shown this once, stored only as a hash." }),
}).openapi("NewApiKey");

export const ApiKeyList = z.object({ data: z.array(ApiKey) }).openapi("ApiKeyList");

export function toApiKey(row: ApiKeyRow, config: Config): z.infer<typeof ApiKey> {
  const policy: KeyPolicy = policyOf(row, config);
  return {
    id: row.id,
    name: row.name,
    prefix: row.prefix,
    admin: row.admin,
    created_at: row.createdAt.toISOString(),
    last_used_at: row.lastUsedAt?.toISOString() ?? null,
    revoked_at: row.revokedAt?.toISOString() ?? null,
    permission_modes: policy.permissionModes,
    work_roots: policy.workRoots,
    max_budget_usd: policy.maxBudgetUsd,
    worktrees: policy.worktrees,
    egress: policy.egress,
    models: policy.models,
    tool_rules: policy.toolRules,
  };
}
