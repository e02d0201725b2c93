import { createHash } from "node:crypto";
import type { RouteHandler } from "@hono/zod-openapi";
import type { Context } from "hono";
import type { AgentRegistry } from "../../../agents/registry.js";
import { enforcePolicy } from "../../../auth/policy.js";
import { resolveWorkDir, WorkDirNotAllowedError } from "../../../auth/work-dir.js";
import type { Config } from "../../../config.js";
import {
  DomainError,
  InvalidRequestError,
  NotFoundError,
  type ValidationIssue,
} from "../../../errors.js";
import { replySettings } from "../../../forges/reply-plan.js";
import { EgressRuleError, parseEgressRule } from "../../../gateway/egress.js";
import { pinnedOrigin } from "../../../hooks/checkout.js";
import {
  deliveryIdOf,
  MAX_DELIVERY_ID_CHARS,
  MAX_EVENT_CHARS,
  receiveDelivery,
} from "../../../hooks/deliveries.js";
import { hookSettings } from "../../../hooks/hook-settings.js";
import { parseSchedule } from "../../../hooks/scheduler.js";
import {
  MAX_VALUE_CHARS,
  reservedBytes,
  TEMPLATE_NAMES,
  unknownPlaceholders,
} from "../../../hooks/template.js";
import {
  isStandardSecret,
  type VerificationKind,
  verifyAgainstDecoy,
  verifyDelivery,
} from "../../../hooks/verify.js";
import { CallbackTargets } from "../../../net/targets.js";
import { settingsWithDefaults } from "../../../session-settings.js";
import { uniqueViolation } from "../../../store/errors.js";
import {
  listDeliveries,
  RESERVED_DELIVERY_ID_PREFIXES,
  settleAbandonedDeliveries,
} from "../../../store/hook-deliveries.js";
import * as store from "../../../store/hooks.js";
import type { HookRow } from "../../../store/schema.js";
import type { Git } from "../../../worktrees/git.js";
import {
  checkWorktreePrerequisites,
  WorktreePrerequisiteError,
} from "../../../worktrees/prerequisites.js";
import { mcpServerIssues, requestedAgent, settingIssues } from "../../agent-settings.js";
import type { AppEnv } from "../../context.js";
import { decodeCursor, pageOf } from "../../cursor.js";
import { refuseUnfitInput } from "../../input.js";
import type * as routes from "./hooks.routes.js";
import {
  type CreateHookBody,
  toHook,
  toHookDelivery,
  toReceipt,
  type UpdateHookBody,
} from "./hooks.schemas.js";

/**
 * A hook's definition as stored, after the checks zod cannot make alone: secrets that fit the
 * kind, templates with known placeholders, a parseable schedule, an allowed work dir.
 */
async function definition(
  config: Config,
  agents: AgentRegistry,
  /** Git in a work dir as the hook's tenant: its sessions' git. */
  gitIn: (workDir: string) => Git,
  body: UpdateHookBody,
  secrets: { secret: string; callbackSecret: string | null; forgeToken: string | null },
  /** The origin a hook being changed pins: it keeps it unless the body names another. */
  pinned: string | null = null,
): Promise<Omit<store.HookInput, "name" | "ownerKeyId">> {
  const errors: ValidationIssue[] = [];
  const issue = (path: string, message: string) => errors.push({ location: "body", path, message });
  if (body.verification === "standard" && !isStandardSecret(secrets.secret)) {
    issue("secret", "a standard hook's secret is whsec_ and base64 of 16 to 64 bytes");
  }
  if (body.verification !== "standard" && secrets.secret.length < 16) {
    issue("secret", "expected at least 16 characters");
  }
  const callbackRefusal =
    body.callback_url &&
    new CallbackTargets(config.hooks.callback.allow).urlRefusal(body.callback_url);
  if (callbackRefusal) issue("callback_url", callbackRefusal);
  const callbackSecret = body.callback_url ? secrets.callbackSecret : null;
  if (body.callback_url && !callbackSecret) {
    issue("callback_secret", "a callback_url needs a callback_secret to sign with");
  } else if (callbackSecret && !isStandardSecret(callbackSecret)) {
    issue("callback_secret", "expected whsec_ and base64 of 16 to 64 bytes");
  }
  const forge =
    body.forge?.kind ??
    (body.verification === "github" || body.verification === "gitlab" ? body.verification : null);
  if (body.forge && !forge) {
    issue("forge.kind", "a hook verified by `standard` or `bearer` names its forge's kind");
  }
  const apiRefusal =
    body.forge?.api_url &&
    new CallbackTargets(config.hooks.callback.allow).urlRefusal(body.forge.api_url);
  if (apiRefusal) issue("forge.api_url", apiRefusal);
  if (secrets.forgeToken && !forge) {
    issue(
      "forge_token",
      "a forge token goes with a forge: `verification` github or gitlab, or `forge.kind`",
    );
  }
  errors.push(...triggerIssues(body, forge));
  if (body.reply && !(forge && secrets.forgeToken)) {
    issue("reply", "replies go through a forge's API: the hook needs a forge and a forge_token");
  } else if (body.reply?.status === "check" && forge === "gitlab") {
    issue("reply.status", "GitLab has commit statuses, not check runs: use `status`");
  }
  for (const field of [
    "prompt_template",
    "system_prompt_template",
    "session_key_template",
  ] as const) {
    const template = body[field] ?? "";
    const unknown = unknownPlaceholders(template);
    const { promptMaxBytes } = config.hooks;
    const reserved = reservedBytes(template);
    if (unknown.length > 0) {
      issue(
        field,
        `unknown placeholder ${unknown[0]}: use {{payload.<path>}}, ${TEMPLATE_NAMES.map((n) => `{{${n}}}`).join(", ")}`,
      );
    } else if (reserved > promptMaxBytes) {
      issue(
        field,
        `could render past AGENT_BRIDGE_HOOK_PROMPT_MAX_BYTES (${promptMaxBytes}): its fixed text and ${MAX_VALUE_CHARS} bytes for each placeholder come to ${reserved}`,
      );
    }
  }
  if (body.timezone !== undefined && !body.schedule) {
    issue("timezone", "a timezone goes with a schedule");
  }
  if (body.schedule) {
    try {
      const cron = parseSchedule(body.schedule, body.timezone ?? "UTC");
      if (body.timezone) new Intl.DateTimeFormat("en", { timeZone: body.timezone });
      // A date no year has (30 February) passes the parser and would be stored never to fire.
      if (!cron.nextRun()) issue("schedule", "never fires: no date matches it");
    } catch (err) {
      issue(
        "schedule",
        `expected a cron pattern of 5 fields, or 6 with seconds first, in a known time zone: ${(err as Error).message}`,
      );
    }
  }
  let workDir: string | null = null;
  if (body.work_dir !== undefined) {
    try {
      workDir = await resolveWorkDir(body.work_dir, config.allowedRoots);
    } catch (err) {
      if (!(err instanceof WorkDirNotAllowedError)) throw err;
      issue("work_dir", err.message);
    }
  }
  if (body.checkout && body.worktree === false) {
    issue(
      "checkout",
      "checking a pull request out needs worktree mode: leave worktree unset or true",
    );
  }
  if (body.checkout && !forge) {
    issue(
      "checkout",
      "a checkout hook needs a forge: `verification` github or gitlab, or `forge.kind`",
    );
  }
  if (body.checkout && body.schedule) {
    issue("checkout", "a scheduled tick is about no pull request: a checkout hook has no schedule");
  }
  const worktree = body.worktree ?? (body.checkout ? true : undefined);
  if (worktree && errors.length === 0) {
    try {
      await checkWorktreePrerequisites(gitIn(workDir ?? config.workDir));
    } catch (err) {
      if (!(err instanceof WorktreePrerequisiteError)) throw err;
      issue("worktree", `worktree mode is unavailable: ${err.message}`);
    }
  }
  // The agent and settings its sessions will get, checked as a session's are.
  const agent = requestedAgent(agents, body.agent ?? config.agents.default);
  const mcpServers = body.mcp_servers ?? [];
  errors.push(
    ...mcpServerIssues(config.agents.mcpServers, mcpServers),
    ...settingIssues(
      agent,
      settingsWithDefaults(config, agent.name, {
        permissionMode: body.permission_mode,
        effort: body.effort,
        model: body.model,
        worktree,
        mcpServers,
        approvals: body.approvals,
      }),
    ),
  );
  if (body.checkout_origin !== undefined && !body.checkout) {
    issue("checkout_origin", "an origin goes with `checkout`");
  }
  let checkoutOrigin: string | null = null;
  if (body.checkout && errors.length === 0) {
    const origin = await pinnedOrigin(
      body.checkout_origin ?? pinned ?? undefined,
      gitIn(workDir ?? config.workDir),
      { localRoots: config.hooks.checkoutLocalOrigins, allow: config.hooks.callback.allow },
    );
    if ("refusal" in origin) issue("checkout_origin", origin.refusal);
    else checkoutOrigin = origin.origin;
  }
  if (errors.length > 0) throw new InvalidRequestError(errors);
  return {
    agent: body.agent ?? null,
    verification: body.verification,
    secret: secrets.secret,
    promptTemplate: body.prompt_template,
    systemPromptTemplate: body.system_prompt_template ?? null,
    sessionKeyTemplate: body.session_key_template ?? null,
    workDir,
    worktree: worktree ?? null,
    checkout: body.checkout ?? null,
    checkoutOrigin,
    permissionMode: body.permission_mode ?? null,
    model: body.model ?? null,
    effort: body.effort ?? null,
    mcpServers,
    approvals: body.approvals ?? "deny",
    events: body.events ?? [],
    outputSchema: body.output_schema ?? null,
    callbackUrl: body.callback_url ?? null,
    callbackSecret,
    forge,
    forgeApiUrl: forge ? (body.forge?.api_url?.replace(/\/+$/, "") ?? null) : null,
    forgeToken: forge ? secrets.forgeToken : null,
    triggers: body.triggers ?? null,
    trusted: body.trusted ?? null,
    fork: body.fork ?? null,
    reply: forge && body.reply ? replySettings(body.reply) : null,
    schedule: body.schedule ?? null,
    timezone: body.schedule ? (body.timezone ?? "UTC") : null,
  };
}

/**
 * A hook's triggers name at least one, and those that read a forge's payload have a forge; its
 * fork's egress entries read as a key's do.
 */
function triggerIssues(body: UpdateHookBody, forge: string | null): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  const issue = (path: string, message: string) => issues.push({ location: "body", path, message });
  const triggers = body.triggers;
  if (triggers) {
    const named = Object.entries(triggers).filter(
      ([, value]) => value !== undefined && value !== false,
    );
    if (named.length === 0) {
      issue(
        "triggers",
        "names no trigger: give mention, labels, pull_request or manual, or leave it out",
      );
    }
    for (const [name] of named) {
      if (name !== "manual" && !forge) {
        issue(
          `triggers.${name}`,
          "reads a forge's payload: the hook needs `verification` github or gitlab, or `forge.kind`",
        );
      }
    }
  }
  for (const [i, entry] of (body.fork?.egress ?? []).entries()) {
    try {
      parseEgressRule(entry);
    } catch (err) {
      if (!(err instanceof EgressRuleError)) throw err;
      issue(`fork.egress.${i}`, err.message);
    }
  }
  return issues;
}

/** A hook runs with its creator's policy: what it would ask of a session must be allowed. */
function enforceHookPolicy(
  c: Context<AppEnv>,
  ownerKeyId: string | null,
  fields: Omit<store.HookInput, "name" | "ownerKeyId">,
) {
  const { config } = c.var;
  return enforcePolicy(c.var.db, config, ownerKeyId, {
    settings: hookSettings(config, fields),
    workDir: fields.workDir,
  });
}

export const createHook: RouteHandler<typeof routes.createHook, AppEnv> = async (c) => {
  const body: CreateHookBody = c.req.valid("json");
  const gitIn = (dir: string) => c.var.git.forSession(c.var.principal.keyId, dir);
  const fields = await definition(c.var.config, c.var.agents, gitIn, body, {
    secret: body.secret,
    callbackSecret: body.callback_secret ?? null,
    forgeToken: body.forge_token ?? null,
  });
  await enforceHookPolicy(c, c.var.principal.keyId, fields);
  let row: HookRow;
  try {
    row = await store.insertHook(c.var.db, {
      name: body.name,
      ownerKeyId: c.var.principal.keyId,
      ...fields,
    });
  } catch (err) {
    if (uniqueViolation(err) !== "hooks_name_unique") throw err;
    throw new DomainError("hook_exists", `A hook named ${JSON.stringify(body.name)} exists`);
  }
  return c.json(toHook(row), 201, { Location: `/v1/hooks/${row.name}` });
};

export const listHooks: RouteHandler<typeof routes.listHooks, AppEnv> = async (c) =>
  c.json({ data: (await store.listHooks(c.var.db)).map(toHook) }, 200);

export const getHook: RouteHandler<typeof routes.getHook, AppEnv> = async (c) => {
  const { name } = c.req.valid("param");
  const row = await store.getHookByName(c.var.db, name);
  if (!row) throw new NotFoundError("hook", name);
  return c.json(toHook(row), 200);
};

export const updateHook: RouteHandler<typeof routes.updateHook, AppEnv> = async (c) => {
  const { name } = c.req.valid("param");
  const body = c.req.valid("json");
  const existing = await store.getHookByName(c.var.db, name);
  if (!existing) throw new NotFoundError("hook", name);
  const gitIn = (dir: string) => c.var.git.forSession(existing.ownerKeyId, dir);
  const fields = await definition(
    c.var.config,
    c.var.agents,
    gitIn,
    body,
    {
      secret: body.secret ?? existing.secret,
      callbackSecret: body.callback_secret ?? existing.callbackSecret,
      forgeToken: body.forge_token === undefined ? existing.forgeToken : body.forge_token,
    },
    existing.checkoutOrigin,
  );
  await enforceHookPolicy(c, existing.ownerKeyId, fields);
  const row = await store.updateHook(c.var.db, name, fields);
  if (!row) throw new NotFoundError("hook", name);
  return c.json(toHook(row), 200);
};

export const deleteHook: RouteHandler<typeof routes.deleteHook, AppEnv> = async (c) => {
  const { name } = c.req.valid("param");
  if (!(await store.deleteHook(c.var.db, name))) throw new NotFoundError("hook", name);
  return c.body(null, 204);
};

export const listHookDeliveries: RouteHandler<typeof routes.listHookDeliveries, AppEnv> = async (
  c,
) => {
  const { name } = c.req.valid("param");
  const { limit, cursor } = c.req.valid("query");
  const hook = await store.getHookByName(c.var.db, name);
  if (!hook) throw new NotFoundError("hook", name);
  const after = cursor === undefined ? undefined : decodeCursor(cursor);
  // Nobody is shown a delivery as `received` that no process will ever move on.
  await settleAbandonedDeliveries(c.var.db, hook.id);
  const rows = await listDeliveries(c.var.db, hook.id, { limit: limit + 1, after });
  const { page, next_cursor } = pageOf(rows, limit, (row) => ({
    createdAt: row.receivedAt,
    id: row.id,
  }));
  return c.json({ data: page.map(toHookDelivery), next_cursor }, 200);
};

/** The delivery's JSON: the body itself, or (GitHub's form encoding) its `payload` field. */
function parsePayload(body: Buffer, contentType: string | undefined): unknown {
  const malformed = (why: string) => new DomainError("malformed_json", why);
  let text = body.toString("utf8");
  if (/^application\/x-www-form-urlencoded\b/i.test(contentType ?? "")) {
    const payload = new URLSearchParams(text).get("payload");
    if (payload === null) throw malformed("a form-encoded delivery needs a payload field");
    text = payload;
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw malformed(`the body is not JSON: ${(err as Error).message}`);
  }
}

export const deliverHook: RouteHandler<typeof routes.deliverHook, AppEnv> = async (c) => {
  const { name } = c.req.valid("param");
  // The signature covers these exact bytes, so they are read once, as bytes, before anything else.
  const body = Buffer.from(await c.req.arrayBuffer());
  const header = (n: string) => c.req.header(n);
  const { db, runs, config, logger } = c.var;
  const hook = await store.getHookByName(db, name);
  if (!hook) {
    verifyAgainstDecoy(body, header);
    throw new NotFoundError("hook", name);
  }
  const verdict = verifyDelivery(hook.verification as VerificationKind, hook.secret, body, header);
  if (!verdict.ok) {
    logger.warn("refused a hook delivery", { hook: hook.name, reason: verdict.reason });
    throw new DomainError("invalid_signature", `the delivery does not verify: ${verdict.reason}`);
  }
  const payload = parsePayload(body, header("content-type"));
  // The whole payload, not only what the templates take out: a signed sender is held to the rules
  // of any body, and a refused delivery is refused before anything of it is recorded.
  refuseUnfitInput("json", payload);
  const deliveryId = deliveryIdOf(verdict.deliveryId);
  if (deliveryId.length > MAX_DELIVERY_ID_CHARS) {
    throw new DomainError(
      "validation_failed",
      `the delivery id exceeds ${MAX_DELIVERY_ID_CHARS} characters`,
    );
  }
  const reserved = RESERVED_DELIVERY_ID_PREFIXES.find((p) => deliveryId.startsWith(p));
  if (reserved) {
    throw new DomainError(
      "validation_failed",
      `delivery ids starting with ${reserved} are reserved`,
    );
  }
  // Without an event header, the event is the payload's own: GitLab's `object_kind`, else `type`.
  const field = hook.verification === "gitlab" ? "object_kind" : "type";
  const type =
    payload !== null && typeof payload === "object" && field in payload
      ? (payload as Record<string, unknown>)[field]
      : undefined;
  const event = (verdict.event ?? (typeof type === "string" ? type : "")).slice(0, MAX_EVENT_CHARS);
  const receipt = await receiveDelivery({ db, runs, config, logger }, hook, {
    deliveryId,
    event,
    payload,
    // GitHub signs the body alone and GitLab's token signs nothing: the same body under a new
    // delivery id is a replay.
    bodySha256:
      hook.verification === "github" || hook.verification === "gitlab"
        ? createHash("sha256").update(body).digest("hex")
        : undefined,
  });
  const answer = toReceipt(hook.name, receipt.delivery, receipt.duplicate);
  if (receipt.duplicate || !answer.run_url) return c.json(answer, 200);
  return c.json(answer, 202, { Location: answer.run_url });
};
