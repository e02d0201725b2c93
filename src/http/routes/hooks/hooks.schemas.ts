import { z } from "@hono/zod-openapi";
import { AgentName } from "../../../agents/registry.js";
import { DEFAULT_API_URLS } from "../../../forges/api.js";
import { FORGES } from "../../../forges/delivery.js";
import { apiUrlOf, forgeOf } from "../../../forges/hook-forge.js";
import { REPLY_MARKER } from "../../../forges/marker.js";
import { TRUST_DEFAULTS, trustOf } from "../../../forges/trust.js";
import {
  GITHUB_ASSOCIATIONS,
  GITLAB_ACCESS_LEVELS,
  PULL_REQUEST_ACTIONS,
} from "../../../hook-triggers.js";
import { CHECKOUT_KINDS } from "../../../hooks/checkout.js";
import { nextTick } from "../../../hooks/scheduler.js";
import { MAX_VALUE_CHARS } from "../../../hooks/template.js";
import { VERIFICATION_KINDS } from "../../../hooks/verify.js";
import { OutputSchema } from "../../../output-schema.js";
import { Approvals, Effort, PermissionMode } from "../../../session-settings.js";
import type { HookDeliveryRow, HookRow } from "../../../store/schema.js";
import { MAX_ORIGIN_CHARS } from "../../../worktrees/checkout-origin.js";
import { McpServerNames } from "../sessions/sessions.schemas.js";

const hookName = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/, {
  error: "expected a hook name: letters, digits, '.', '_' or '-', at most 100",
});

export const HookName = hookName.openapi({
  param: { name: "name", in: "path" },
  example: "pr-review",
});

const template = (max: number, description: string) =>
  z.string().min(1).max(max).openapi({ description });

const TEMPLATE_HELP = `Placeholders: \`{{payload.a.b}}\` (a path into the delivery's JSON; a number indexes an array), \`{{event}}\`, \`{{delivery_id}}\`, \`{{hook}}\`, \`{{fire_time}}\` (scheduled runs), \`{{pull_request.number}}\`, \`{{pull_request.head_sha}}\`, \`{{pull_request.head_ref}}\`, \`{{pull_request.base_ref}}\` (what a GitHub delivery says of its pull request, a GitLab one of its merge request; empty when it says nothing, e.g. an issue comment names the number alone). A value is inserted as text, never evaluated (a \`{{…}}\` inside it stays as it is), cut to ${MAX_VALUE_CHARS} characters; a missing path is empty; an object is inserted as JSON. The rendered text is bounded by \`AGENT_BRIDGE_HOOK_PROMPT_MAX_BYTES\` (default 256 KiB): a template whose fixed text plus ${MAX_VALUE_CHARS} bytes a placeholder exceeds it is refused.`;

const login = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}(\[bot\])?$/, {
  error: "expected a user name: letters, digits, '.', '_' or '-', at most 100, maybe [bot]",
});

const Triggers = z
  .strictObject({
    mention: z
      .string()
      .regex(/^@[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,98}[A-Za-z0-9_])?$/, {
        error: "expected @ and a user name: letters, digits, '.', '_' or '-', at most 100",
      })
      .optional()
      .openapi({
        description: `A handle, e.g. \`@agent-bridge\`: a new comment (GitHub \`issue_comment\`, \`pull_request_review_comment\`; GitLab \`note\` on a merge request or issue), or a new issue or pull request whose text mentions it as a word. Text carrying the bridge's marker \`${REPLY_MARKER}\` (its own replies) never matches.`,
      }),
    labels: z
      .array(
        z
          .string()
          .min(1)
          .max(255)
          .regex(/^[^\p{Cc}]+$/u, { error: "expected a label without control characters" }),
      )
      .min(1)
      .max(20)
      .optional()
      .openapi({
        description:
          "A pull (merge) request or issue was given one of these labels (GitHub `labeled`; GitLab an update whose `changes.labels` added it); compared regardless of case.",
      }),
    pull_request: z
      .array(z.enum(PULL_REQUEST_ACTIONS))
      .min(1)
      .max(PULL_REQUEST_ACTIONS.length)
      .optional()
      .openapi({
        description:
          "Pull request actions in GitHub's words; a GitLab merge request's `open` is `opened`, `reopen` `reopened`, an `update` with new commits `synchronize`, one that takes the draft off `ready_for_review`, `close` and `merge` `closed`.",
      }),
    manual: z.boolean().optional().openapi({
      description:
        "GitHub `workflow_dispatch` and `repository_dispatch`, and a `standard` or `bearer` hook's delivery that carries no forge payload (a CI step calling the bridge).",
    }),
  })
  .openapi("HookTriggers", {
    description:
      "A delivery runs only when it matches one of these (after `events`); else it is recorded `ignored`, its `detail` saying why. Absent or null: every delivery runs.",
  });

const Trusted = z
  .strictObject({
    associations: z
      .array(z.enum(GITHUB_ASSOCIATIONS))
      .max(GITHUB_ASSOCIATIONS.length)
      .optional()
      .openapi({
        description: `GitHub: the \`author_association\` of a mention's comment, issue or pull request that may trigger. Default ${TRUST_DEFAULTS.associations.join(", ")}. A labeller has none in the payload: GitHub lets only triage or more label, and with a \`forge_token\` the labeller's permission is looked up and must be write or more.`,
      }),
    bots: z.array(login).max(50).optional().openapi({
      description:
        "Bots that may trigger (`renovate` or `renovate[bot]`); any other bot may not. Default none.",
    }),
    gitlab_access_level: z
      .union(GITLAB_ACCESS_LEVELS.map((level) => z.literal(level)))
      .optional()
      .openapi({
        description:
          "GitLab: the least access level (looked up with the `forge_token`; without one nobody may) that may trigger. Default 30, Developer.",
      }),
  })
  .openapi("HookTrusted", {
    description:
      "Who may trigger the hook's `mention` and `labels` triggers (what a person wrote or did); `pull_request` and `manual` are not by a person's word.",
  });

const ForkPolicy = z
  .strictObject({
    permission_mode: PermissionMode.optional().openapi({
      description:
        "Default: the hook's mode, unless that bypasses permission checks: then `default`.",
    }),
    egress: z.array(z.string().min(1).max(300)).max(100).optional().openapi({
      description:
        "Where a sandboxed run may connect, as a key's `egress` (and only where the key's list allows it too). Default none.",
    }),
  })
  .openapi("HookForkPolicy", {
    description:
      "What a run for a pull request from a fork gets in place of the hook's mode and its key's egress. Applies to a hook with `triggers`, and to one without only when set. A GitHub issue comment on a pull request does not say where its head lives: it is looked up with the `forge_token`, and counts as a fork without one.",
  });

/** The fields a hook is made of, without its name and secrets. */
const hookFields = {
  verification: z.enum(VERIFICATION_KINDS).openapi({
    description:
      "How a delivery proves it comes from the sender: `github` (`X-Hub-Signature-256`, HMAC-SHA256 of the body with the secret), `gitlab` (`X-Gitlab-Token` equal to the secret; the delivery id is `Idempotency-Key` or `X-Gitlab-Event-UUID`, the event the payload's `object_kind`), `standard` (Standard Webhooks: `webhook-id`, `webhook-timestamp` within 5 minutes, `webhook-signature: v1,<base64>`; secret `whsec_…`), `bearer` (`Authorization: Bearer <secret>`).",
  }),
  prompt_template: template(100_000, `The prompt of each run. ${TEMPLATE_HELP}`),
  system_prompt_template: template(
    100_000,
    "Appended to the system prompt of each run. Without it, a webhook's run is told it is an automated invocation from CI with nobody watching; a scheduled run is always told it is a scheduled invocation with nobody listening, and this follows.",
  ).optional(),
  session_key_template: template(
    1000,
    "Deliveries whose key renders the same continue one session (e.g. `{{payload.repository.full_name}}#{{payload.pull_request.number}}`); without it every delivery gets a new session.",
  ).optional(),
  work_dir: z.string().min(1).max(4096).optional().openapi({
    description: "As for a session: inside `AGENT_BRIDGE_ALLOWED_ROOTS`.",
  }),
  agent: AgentName.optional().openapi({
    description: "The agent of the hook's sessions. Default: the server's `AGENT_BRIDGE_AGENT`.",
  }),
  worktree: z.boolean().optional(),
  checkout: z.enum(CHECKOUT_KINDS).nullable().optional().openapi({
    description:
      "`pull_request`: each delivery about a pull request (GitHub) or merge request (GitLab) runs in a worktree of the request's head, fetched by the server from `checkout_origin` (`refs/pull/N/head`, `refs/merge-requests/N/head`), which needs worktree mode (implied; `worktree: false` is refused) and no `schedule`. A session continued by the session key keeps its worktree while the head stays; after new commits it gets a fresh worktree at the new head, and the old one is removed with the agent's uncommitted changes and commits on it. A delivery about anything else is refused (`failed`, with the reason in `detail`). The forge is GitLab for `verification: gitlab`, GitHub otherwise. Absent or null: the run works in the work dir (or its session's worktree) as without.",
  }),
  checkout_origin: z.string().min(1).max(MAX_ORIGIN_CHARS).optional().openapi({
    description:
      "With `checkout`: where the server fetches the requests' heads from, pinned here and never read from the work dir's repository at fetch time: an `https://` URL (no `user:pass@`: a private repository is read with `forge_token`; an address written in it is held to `callback_url`'s rules), or an absolute path under `AGENT_BRIDGE_CHECKOUT_LOCAL_ORIGINS`. Left out: on a change, the origin the hook pins already; else the work dir repository's `origin` as it reads now (shown as `checkout_origin`; check it).",
    example: "https://github.com/acme/widgets.git",
  }),
  permission_mode: PermissionMode.optional(),
  model: z
    .string()
    .min(1)
    .max(200)
    .regex(/^[A-Za-z0-9._:\-[\]/]+$/, { error: "expected a model name or alias, e.g. sonnet" })
    .optional(),
  effort: Effort.optional(),
  mcp_servers: McpServerNames.optional().openapi({
    description:
      "The MCP servers its sessions get, as for a session (by their names in `AGENT_BRIDGE_MCP_CONFIG`; Claude Code only).",
  }),
  approvals: Approvals.optional().openapi({
    description:
      "Who answers the permission requests of its sessions' runs, as for a session. Default `deny`: a hook's run is unattended; with `api` its owner's key answers them.",
  }),
  events: z.array(z.string().min(1).max(200)).max(50).optional().openapi({
    description:
      "Only deliveries of these events start a run (an entry may also be `event.action`, e.g. `pull_request.opened`); others are recorded as `ignored`. Empty or absent: every event.",
  }),
  output_schema: OutputSchema.optional().openapi({
    description:
      "The `output_schema` of each delivery's run (see `PostMessage`): its completion, and so its callback, carry `structured_output`.",
  }),
  callback_url: z
    .url({ protocol: /^https?$/, error: "expected an http:// or https:// URL" })
    .max(2000)
    .optional()
    .openapi({
      description:
        "Where the outcome of each run is POSTed when it completes, signed the Standard Webhooks way with `callback_secret`. Only a global unicast address (an IPv6 address carrying an IPv4 one, as IPv4-mapped, NAT64, 6to4, Teredo or IPv4-compatible, is judged as that one) unless `AGENT_BRIDGE_CALLBACK_ALLOW` lists it, checked here and, for a name, at each attempt after resolving it; not `localhost` or a name under it; no `user:pass@`.",
    }),
  forge: z
    .strictObject({
      kind: z.enum(FORGES).optional().openapi({
        description:
          "Default: the hook's `verification` when that is `github` or `gitlab`; needed otherwise.",
      }),
      api_url: z
        .url({ protocol: /^https?$/, error: "expected an http:// or https:// URL" })
        .max(2000)
        .optional()
        .openapi({
          description: `The forge's REST API, for GitHub Enterprise or a self-managed GitLab (e.g. \`https://gitlab.example.com/api/v4\`). Default: ${Object.values(DEFAULT_API_URLS).join(" or ")}. Reached under the same address rules as \`callback_url\`.`,
        }),
    })
    .optional()
    .openapi({
      description:
        "The GitHub or GitLab the deliveries come from: what their payloads are read as (for `triggers`) and whose API the hook calls with `forge_token`.",
    }),
  triggers: Triggers.nullable().optional(),
  trusted: Trusted.optional(),
  fork: ForkPolicy.optional(),
  reply: z
    .strictObject({
      comment: z.boolean().optional().openapi({
        description:
          "Default true: a comment on the issue or pull request (a GitLab note on the issue or merge request), made when the run starts, updated with its progress (its status and the tools it used, at most once per `AGENT_BRIDGE_REPLY_PROGRESS_MS`) and replaced by its result at the end.",
      }),
      status: z.enum(["check", "status", "none"]).optional().openapi({
        description:
          "On the pull (merge) request's head commit: a commit status (`status`, the default; GitLab's only kind) or a GitHub check run (`check`: GitHub lets only a GitHub App's installation token create one), pending while the run goes and success or failure at its end; `none`: neither.",
      }),
      review_comments: z.boolean().optional().openapi({
        description:
          "Default false: at the end, the `review_comments: [{path, line, body}]` of the run's structured output as a review on the pull request (on GitLab, as one note naming each line).",
      }),
    })
    .optional()
    .openapi({
      description:
        "Replies where the delivery came from, posted with `forge_token` from the durable outbox and listed on the run (`replies`). Needs a forge and its token. A delivery about no issue or pull request (a push, a schedule's tick) gets none.",
    }),
  schedule: z.string().min(1).max(200).optional().openapi({
    description:
      "A cron pattern (5 fields, or 6 with seconds first) that fires: one matching no date, such as `0 0 30 2 *`, is refused. The hook then also fires by itself at each tick.",
    example: "0 6 * * 1-5",
  }),
  timezone: z.string().min(1).max(100).optional().openapi({
    description: "IANA time zone of `schedule`; default UTC.",
    example: "Europe/Berlin",
  }),
};

const secret = z.string().min(8).max(1000).openapi({
  description:
    "Write-only: never returned. For `standard`, a `whsec_` secret (base64 of 16 to 64 bytes).",
});
const forgeToken = z.string().min(1).max(1000).openapi({
  description:
    "Write-only: a token for the forge's API (a GitHub token with `issues`, `pull_requests` and `checks` or `statuses` write; a GitLab token with `api`). Never returned and never in an agent's environment.",
});
const callbackSecret = z.string().max(1000).openapi({
  description: "Write-only: a `whsec_` secret (base64 of 16 to 64 bytes) to sign callbacks with.",
});

export const CreateHookBody = z
  .strictObject({
    name: hookName.openapi({ example: "pr-review" }),
    secret,
    callback_secret: callbackSecret.optional(),
    forge_token: forgeToken.optional(),
    ...hookFields,
  })
  .openapi("CreateHook");
export type CreateHookBody = z.infer<typeof CreateHookBody>;

export const UpdateHookBody = z
  .strictObject({
    secret: secret.optional().openapi({ description: "Left out: the hook keeps its secret." }),
    callback_secret: callbackSecret.optional().openapi({
      description: "Left out: the hook keeps its callback secret.",
    }),
    forge_token: forgeToken
      .nullable()
      .optional()
      .openapi({ description: "Left out: the hook keeps its token; null: it has none." }),
    ...hookFields,
  })
  .openapi("UpdateHook");
export type UpdateHookBody = z.infer<typeof UpdateHookBody>;

export const Hook = z
  .object({
    name: z.string(),
    verification: z.enum(VERIFICATION_KINDS),
    prompt_template: z.string(),
    system_prompt_template: z.string().nullable(),
    session_key_template: z.string().nullable(),
    work_dir: z.string().nullable().openapi({ description: "null: the server's work dir." }),
    agent: z.string().nullable().openapi({ description: "null: the server's default agent." }),
    worktree: z.boolean().nullable().openapi({ description: "null: the server's default." }),
    checkout: z.enum(CHECKOUT_KINDS).nullable().openapi({
      description: "`pull_request`: runs work on the delivery's pull (merge) request's head.",
    }),
    checkout_origin: z.string().nullable().openapi({
      description: "Where the server fetches the requests' heads from; null without `checkout`.",
    }),
    permission_mode: PermissionMode.nullable(),
    model: z.string().nullable(),
    effort: Effort.nullable(),
    mcp_servers: z.array(z.string()),
    approvals: Approvals,
    events: z.array(z.string()),
    output_schema: z
      .record(z.string(), z.unknown())
      .nullable()
      .openapi({ description: "The output schema of each delivery's run; null: none." }),
    callback_url: z.string().nullable(),
    forge: z
      .object({
        kind: z.enum(FORGES),
        api_url: z.string(),
        token_set: z.boolean().openapi({ description: "Whether the hook has a `forge_token`." }),
      })
      .nullable(),
    triggers: Triggers.nullable(),
    trusted: Trusted.required().openapi({ description: "With the defaults in place." }),
    fork: z
      .object({ permission_mode: PermissionMode.nullable(), egress: z.array(z.string()) })
      .nullable()
      .openapi({
        description:
          "The policy of a fork's run; null when none applies (no triggers, no `fork`). `permission_mode` null: the hook's mode, unless that bypasses permission checks: then `default`.",
      }),
    reply: z
      .object({
        comment: z.boolean(),
        status: z.enum(["check", "status", "none"]),
        review_comments: z.boolean(),
      })
      .nullable()
      .openapi({
        description: "What its runs post where their delivery came from; null: nothing.",
      }),
    schedule: z.string().nullable(),
    timezone: z.string().nullable(),
    next_fire_at: z.string().nullable().openapi({
      format: "date-time",
      description: "The schedule's next tick.",
    }),
    delivery_url: z.string().openapi({ description: "Where senders POST deliveries." }),
    created_at: z.string().openapi({ format: "date-time" }),
    updated_at: z.string().openapi({ format: "date-time" }),
  })
  .openapi("Hook");

export const HookList = z.object({ data: z.array(Hook) }).openapi("HookList");

const DELIVERY_OUTCOMES = ["received", "accepted", "ignored", "skipped", "failed"] as const;

export const HookDelivery = z
  .object({
    id: z.string(),
    delivery_id: z.string().openapi({
      description:
        "The sender's id (`X-GitHub-Delivery`, `webhook-id`, `X-Delivery-Id`), or `schedule:<fire time>`.",
    }),
    source: z.enum(["webhook", "schedule"]),
    event: z.string(),
    received_at: z.string().openapi({ format: "date-time" }),
    outcome: z.enum(DELIVERY_OUTCOMES).openapi({
      description:
        "`accepted`: a run was queued; `ignored`: the event is not in the hook's `events`, or the delivery matched none of its `triggers`, or came from someone it does not trust (`detail` says which); `skipped`: a tick while the previous scheduled run was going; `failed`: no run could be queued (see `detail`; also a delivery whose server stopped while starting its run); `received`: being started (for milliseconds).",
    }),
    detail: z.string().nullable(),
    run_id: z.string().nullable(),
    session_id: z.string().nullable(),
  })
  .openapi("HookDelivery");

export const HookDeliveryPage = z
  .object({ data: z.array(HookDelivery), next_cursor: z.string().nullable() })
  .openapi("HookDeliveryPage");

export const DeliveryReceipt = z
  .object({
    hook: z.string(),
    delivery_id: z.string(),
    event: z.string(),
    outcome: z.enum(DELIVERY_OUTCOMES),
    duplicate: z.boolean().openapi({
      description:
        "This delivery id had been received before: the first delivery's answer, and nothing started.",
    }),
    detail: z.string().nullable().openapi({
      description:
        "Why no run was started, for an `ignored` or `failed` delivery (a duplicate's is the first delivery's).",
    }),
    run_id: z.string().nullable(),
    session_id: z.string().nullable(),
    run_url: z
      .string()
      .nullable()
      .openapi({ example: "/v1/runs/7d9f0c1e-5b2a-4c3d-8e4f-1a2b3c4d5e6f" }),
    events_url: z.string().nullable(),
  })
  .openapi("DeliveryReceipt");

export const DeliveryHeaders = z.object({
  "x-hub-signature-256": z
    .string()
    .optional()
    .openapi({
      param: { in: "header" },
      description: "`github`: `sha256=<hex HMAC-SHA256 of the body>`.",
    }),
  "x-github-delivery": z
    .string()
    .optional()
    .openapi({ param: { in: "header" }, description: "`github`: the delivery id." }),
  "x-github-event": z
    .string()
    .optional()
    .openapi({ param: { in: "header" }, description: "`github`: the event." }),
  "webhook-id": z
    .string()
    .optional()
    .openapi({ param: { in: "header" }, description: "`standard`: the delivery id." }),
  "webhook-timestamp": z
    .string()
    .optional()
    .openapi({
      param: { in: "header" },
      description: "`standard`: Unix seconds; refused beyond 5 minutes from the server's clock.",
    }),
  "webhook-signature": z
    .string()
    .optional()
    .openapi({
      param: { in: "header" },
      description:
        "`standard`: `v1,<base64 HMAC-SHA256 of id.timestamp.body>`, space-separated if several.",
    }),
  "x-gitlab-token": z
    .string()
    .optional()
    .openapi({ param: { in: "header" }, description: "`gitlab`: the hook's secret." }),
  "idempotency-key": z
    .string()
    .optional()
    .openapi({
      param: { in: "header" },
      description: "`gitlab`: the delivery id (the same on GitLab's retries).",
    }),
  "x-gitlab-event-uuid": z
    .string()
    .optional()
    .openapi({
      param: { in: "header" },
      description: "`gitlab`: the delivery id when `Idempotency-Key` is absent (GitLab < 17.4).",
    }),
  "x-delivery-id": z
    .string()
    .optional()
    .openapi({ param: { in: "header" }, description: "`bearer`: the delivery id (optional)." }),
  "x-event": z
    .string()
    .optional()
    .openapi({ param: { in: "header" }, description: "`bearer`: the event (optional)." }),
});

export function toHook(row: HookRow): z.infer<typeof Hook> {
  return {
    name: row.name,
    verification: z.enum(VERIFICATION_KINDS).parse(row.verification),
    prompt_template: row.promptTemplate,
    system_prompt_template: row.systemPromptTemplate,
    session_key_template: row.sessionKeyTemplate,
    agent: row.agent,
    work_dir: row.workDir,
    worktree: row.worktree,
    checkout: row.checkout === null ? null : z.enum(CHECKOUT_KINDS).parse(row.checkout),
    checkout_origin: row.checkoutOrigin,
    permission_mode: row.permissionMode === null ? null : PermissionMode.parse(row.permissionMode),
    model: row.model,
    effort: row.effort === null ? null : Effort.parse(row.effort),
    mcp_servers: row.mcpServers,
    approvals: Approvals.parse(row.approvals),
    events: row.events,
    output_schema: row.outputSchema,
    callback_url: row.callbackUrl,
    forge: forgeView(row),
    triggers: row.triggers,
    trusted: trustOf(row.trusted),
    fork:
      row.triggers || row.fork
        ? { permission_mode: row.fork?.permission_mode ?? null, egress: row.fork?.egress ?? [] }
        : null,
    reply: row.reply && {
      comment: row.reply.comment,
      status: row.reply.status,
      review_comments: row.reply.reviewComments,
    },
    schedule: row.schedule,
    timezone: row.schedule ? (row.timezone ?? "UTC") : row.timezone,
    next_fire_at: nextTick(row, new Date())?.toISOString() ?? null,
    delivery_url: `/v1/hooks/${row.name}/deliveries`,
    created_at: row.createdAt.toISOString(),
    updated_at: row.updatedAt.toISOString(),
  };
}

function forgeView(row: HookRow): z.infer<typeof Hook>["forge"] {
  const kind = forgeOf(row);
  const apiUrl = apiUrlOf(row);
  return kind && apiUrl ? { kind, api_url: apiUrl, token_set: row.forgeToken !== null } : null;
}

export function toHookDelivery(row: HookDeliveryRow): z.infer<typeof HookDelivery> {
  return {
    id: row.id,
    delivery_id: row.deliveryId,
    source: z.enum(["webhook", "schedule"]).parse(row.source),
    event: row.event,
    received_at: row.receivedAt.toISOString(),
    outcome: z.enum(DELIVERY_OUTCOMES).parse(row.outcome),
    detail: row.detail,
    run_id: row.runId,
    session_id: row.sessionId,
  };
}

export function toReceipt(
  hook: string,
  row: HookDeliveryRow,
  duplicate: boolean,
): z.infer<typeof DeliveryReceipt> {
  return {
    hook,
    delivery_id: row.deliveryId,
    event: row.event,
    outcome: z.enum(DELIVERY_OUTCOMES).parse(row.outcome),
    duplicate,
    detail: row.detail,
    run_id: row.runId,
    session_id: row.sessionId,
    run_url: row.runId ? `/v1/runs/${row.runId}` : null,
    events_url: row.runId ? `/v1/runs/${row.runId}/events` : null,
  };
}
