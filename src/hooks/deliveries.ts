import { createHash, randomUUID } from "node:crypto";
import { DomainError } from "../errors.js";
import type { Restriction } from "../forges/fork.js";
import { type GateVerdict, gateDelivery } from "../forges/gate.js";
import { planReplies } from "../forges/reply-plan.js";
import { errorFields, errorText, type Logger } from "../log.js";
import { CallbackTargets } from "../net/targets.js";
import { SessionExpiredError } from "../runs/errors.js";
import type { RunManager } from "../runs/manager.js";
import { NO_RUN_OPTIONS } from "../runs/message.js";
import type { SettingsDefaults } from "../session-settings.js";
import type { Database } from "../store/db.js";
import { uniqueViolation } from "../store/errors.js";
import * as store from "../store/hook-deliveries.js";
import type { HookDeliveryRow, HookRow, RunRow, SessionRow } from "../store/schema.js";
import { createSession, deleteSession, getSession } from "../store/sessions.js";
import { changeNames, checkoutFor, NO_CHANGE } from "./checkout.js";
import { hookAgent, hookSettings } from "./hook-settings.js";
import type { HooksConfig } from "./hooks-config.js";
import { asText, render, type TemplateContext } from "./template.js";

// What a verified delivery or a schedule's tick does: record it once, fill the hook's templates,
// find or make the session, and queue the run (behind the session's active run, if any).

export interface HookDeps {
  db: Database;
  runs: RunManager;
  config: { hooks: HooksConfig } & SettingsDefaults;
  logger: Logger;
}

/** Longest delivery id and event name taken from a sender. */
export const MAX_DELIVERY_ID_CHARS = 200;
export const MAX_EVENT_CHARS = 200;
/**
 * How long a GitHub delivery's body is remembered: the same body under another delivery id within
 * this time is a duplicate (like an Idempotency-Key's 24 hours).
 */
export const REPLAY_WINDOW_MS = 24 * 60 * 60 * 1000;
/** A longer rendered session key is stored as its SHA-256. */
const MAX_SESSION_KEY_CHARS = 256;

export class EmptyPromptError extends DomainError {
  constructor(hook: string) {
    super("prompt_empty", `the prompt template of hook ${hook} rendered empty for this delivery`);
  }
}

export interface Receipt {
  delivery: HookDeliveryRow;
  /** True when the delivery id had been seen: nothing was started. */
  duplicate: boolean;
}

export function webhookSystemPrompt(hook: string, event: string, deliveryId: string): string {
  return [
    `This is an automated invocation from CI: a webhook started this run (hook "${hook}", event "${event || "none"}", delivery ${deliveryId}).`,
    "Nobody is watching this conversation as it happens and nobody can answer questions or approve anything:",
    "do not ask for input or confirmation; decide for yourself, do the work, and end with a concise",
    "summary of what you did and found. That final message is the result reported back to CI.",
  ].join(" ");
}

export function scheduleSystemPrompt(hook: HookRow, fireTime: string): string {
  return [
    `This is a scheduled invocation (hook "${hook.name}", schedule "${hook.schedule}" in ${hook.timezone ?? "UTC"}), fired at ${fireTime}.`,
    "Nobody is listening: nobody watches this conversation and nobody can answer questions or approve anything.",
    "Do not ask for input or confirmation; do the work and end with a concise summary of what you did and found.",
  ].join(" ");
}

/** Whether the hook's event filters let the delivery through (no filters: everything). */
export function eventMatches(hook: HookRow, event: string, payload: unknown): boolean {
  if (hook.events.length === 0) return true;
  const action =
    payload !== null && typeof payload === "object" && "action" in payload
      ? (payload as { action: unknown }).action
      : undefined;
  return (
    hook.events.includes(event) ||
    (typeof action === "string" && hook.events.includes(`${event}.${action}`))
  );
}

/**
 * Records a verified webhook delivery and starts its run. The same delivery id again returns the
 * first delivery once it has settled (and starts nothing), unless that one failed: then this one
 * tries again. With `bodySha256` (GitHub's signature leaves the delivery id out), the same body
 * under another id within REPLAY_WINDOW_MS is a duplicate of the delivery it came with first.
 */
export async function receiveDelivery(
  deps: HookDeps,
  hook: HookRow,
  input: { deliveryId: string; event: string; payload: unknown; bodySha256?: string },
): Promise<Receipt> {
  const { db } = deps;
  const accepted = eventMatches(hook, input.event, input.payload);
  const row: store.NewDelivery = {
    hookId: hook.id,
    deliveryId: input.deliveryId,
    source: "webhook",
    event: input.event,
    outcome: accepted ? "received" : "ignored",
    detail: accepted ? null : `event ${input.event || "(none)"} is not in the hook's events`,
  };
  let delivery: HookDeliveryRow | undefined;
  for (let attempt = 0; !delivery; attempt++) {
    try {
      if (!input.bodySha256) {
        delivery = await store.insertDelivery(db, row);
      } else {
        const recorded = await store.insertDeliveryOfBody(db, row, {
          sha256: input.bodySha256,
          windowMs: REPLAY_WINDOW_MS,
        });
        if ("delivery" in recorded) {
          delivery = recorded.delivery;
        } else {
          const first = await settledDelivery(db, hook.id, recorded.firstDeliveryId);
          if (!first) continue; // gone meanwhile: the next attempt takes its body over
          deps.logger.warn("a delivery's body came before under another id: a duplicate", {
            hook: hook.name,
            delivery_id: input.deliveryId,
            first_delivery_id: first.deliveryId,
          });
          return { delivery: first, duplicate: true };
        }
      }
    } catch (err) {
      if (uniqueViolation(err) !== "hook_deliveries_hook_delivery_id") throw err;
      const first = await settledDelivery(db, hook.id, input.deliveryId);
      if (!first) continue; // forgotten meanwhile by another retry of a failed one
      if (first.outcome !== "failed" || attempt > 0) return { delivery: first, duplicate: true };
      await store.forgetFailedDelivery(db, first.id);
    }
  }
  if (!accepted) return { delivery, duplicate: false };
  let verdict: GateVerdict;
  try {
    verdict = await gateDelivery(hook, input, {
      targets: new CallbackTargets(deps.config.hooks.callback.allow),
      timeoutMs: deps.config.hooks.callback.timeoutMs,
      hookMode: () => hookSettings(deps.config, hook).permissionMode,
    });
  } catch (err) {
    await settleFailed(deps, hook, delivery, err);
    throw err;
  }
  if (!verdict.run) {
    const ignored = { outcome: "ignored", detail: verdict.detail };
    await settle(deps, delivery, ignored);
    return { delivery: { ...delivery, ...ignored }, duplicate: false };
  }
  const context: TemplateContext = {
    payload: input.payload,
    event: input.event,
    delivery_id: input.deliveryId,
    hook: hook.name,
    fire_time: "",
    ...changeNames(hook, input.event, input.payload),
  };
  return {
    delivery: await start(deps, hook, delivery, context, verdict.restriction),
    duplicate: false,
  };
}

/**
 * The delivery of that id once it has settled, or undefined when there is none. A delivery being
 * started settles within milliseconds (`start` settles it on every path); one its process left
 * `received` is settled here as abandoned once it is stale.
 */
async function settledDelivery(db: Database, hookId: string, deliveryId: string) {
  for (;;) {
    await store.settleAbandonedDeliveries(db, hookId);
    const delivery = await store.findDelivery(db, hookId, deliveryId);
    if (delivery?.outcome !== "received") return delivery;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * One tick of the hook's schedule: recorded in the database first (so that of several processes one
 * fires it), skipped and recorded as such while the hook's previous scheduled run is going.
 */
export async function fireSchedule(
  deps: HookDeps,
  hook: HookRow,
  at: Date,
): Promise<HookDeliveryRow | undefined> {
  const { db } = deps;
  const fireTime = at.toISOString();
  const busy = await store.busyScheduledDelivery(db, hook.id);
  let delivery: HookDeliveryRow;
  try {
    delivery = await store.insertDelivery(db, {
      hookId: hook.id,
      deliveryId: `${store.SCHEDULE_DELIVERY_PREFIX}${fireTime}`,
      source: "schedule",
      event: "schedule",
      outcome: busy ? "skipped" : "received",
      detail: busy
        ? `the previous scheduled run${busy.runId ? ` (${busy.runId})` : ""} was still going`
        : null,
    });
  } catch (err) {
    if (uniqueViolation(err) === "hook_deliveries_hook_delivery_id") return undefined; // another process has it
    throw err;
  }
  if (busy) return delivery;
  const context: TemplateContext = {
    payload: {},
    event: "schedule",
    delivery_id: delivery.deliveryId,
    hook: hook.name,
    fire_time: fireTime,
    ...NO_CHANGE,
  };
  return start(deps, hook, delivery, context);
}

/** Recorded for any other failure, whose message may hold SQL, parameters or paths (logged). */
const INTERNAL_FAILURE =
  "the run could not be started: an internal error (the server's log has the cause)";

/**
 * Starts the delivery's run (under a fork's restriction, if any) and settles the delivery on
 * every path: `accepted` with it, or `failed`.
 */
async function start(
  deps: HookDeps,
  hook: HookRow,
  delivery: HookDeliveryRow,
  context: TemplateContext,
  restriction: Restriction | null = null,
): Promise<HookDeliveryRow> {
  let run: RunRow;
  let session: SessionRow;
  try {
    ({ run, session } = await submitRun(deps, hook, delivery, context, restriction));
  } catch (err) {
    await settleFailed(deps, hook, delivery, err);
    throw err;
  }
  const settled = { outcome: "accepted", runId: run.id, sessionId: session.id };
  await settle(deps, delivery, settled);
  return { ...delivery, ...settled, detail: null };
}

/** Settles a delivery that started no run as `failed`, saying why when that is the client's to know. */
async function settleFailed(
  deps: HookDeps,
  hook: HookRow,
  delivery: HookDeliveryRow,
  err: unknown,
) {
  // A refusal's message says why no run started, and holds nothing of the server's.
  const refusal = err instanceof DomainError;
  if (!refusal) {
    deps.logger.error("a hook delivery could not start its run", {
      hook: hook.name,
      delivery_id: delivery.deliveryId,
      ...errorFields(err),
    });
  }
  const detail = refusal ? err.message : INTERNAL_FAILURE;
  await settle(deps, delivery, { outcome: "failed", detail });
}

/**
 * Records the delivery's outcome. Should that write fail too (the database gone), the delivery
 * stays `received` until it is stale and settled as abandoned (see settledDelivery).
 */
async function settle(
  deps: HookDeps,
  delivery: HookDeliveryRow,
  outcome: Parameters<typeof store.settleDelivery>[2],
) {
  await store.settleDelivery(deps.db, delivery.id, outcome).catch((err: unknown) => {
    deps.logger.error("could not record a hook delivery's outcome", {
      delivery_id: delivery.deliveryId,
      outcome: outcome.outcome,
      error: errorText(err),
    });
  });
}

/**
 * The run's system prompt: for a tick, the schedule's framing followed by the rendered template;
 * for a webhook, the rendered template or else the CI framing.
 */
function systemPromptOf(deps: HookDeps, hook: HookRow, source: string, context: TemplateContext) {
  const template = hook.systemPromptTemplate;
  const rendered =
    template === null ? null : render(template, context, bound(deps, "system_prompt_template"));
  if (source === "schedule") {
    const framing = scheduleSystemPrompt(hook, context.fire_time);
    return rendered === null ? framing : `${framing}\n\n${rendered}`;
  }
  return rendered ?? webhookSystemPrompt(hook.name, context.event, context.delivery_id);
}

const bound = (deps: HookDeps, name: string) => ({
  maxBytes: deps.config.hooks.promptMaxBytes,
  name,
});

/** Renders the prompts, finds or makes the session, and queues the run behind the session's. */
async function submitRun(
  deps: HookDeps,
  hook: HookRow,
  delivery: HookDeliveryRow,
  context: TemplateContext,
  restriction: Restriction | null,
): Promise<{ run: RunRow; session: SessionRow }> {
  const text = render(hook.promptTemplate, context, bound(deps, "prompt_template"));
  if (text.trim() === "") throw new EmptyPromptError(hook.name);
  // Before a session is found or made: a delivery refused here leaves nothing behind.
  const checkout = checkoutFor(hook, context.event, context.payload);
  const systemPrompt = systemPromptOf(deps, hook, delivery.source, context);
  const message = {
    text,
    systemPrompt: systemPrompt.trim() === "" ? null : systemPrompt,
    trigger: delivery.source,
    idempotencyKey: null,
    waitForSession: true,
    outputSchema: hook.outputSchema,
    checkout,
    ...(restriction && {
      options: { ...NO_RUN_OPTIONS, permissionMode: restriction.permissionMode },
      egress: restriction.egress,
    }),
    callback:
      hook.callbackUrl && hook.callbackSecret
        ? { url: hook.callbackUrl, secret: hook.callbackSecret }
        : null,
    replies: planReplies(hook, context.event, context.payload),
  };
  const key = hook.sessionKeyTemplate
    ? sessionKey(render(hook.sessionKeyTemplate, context, bound(deps, "session_key_template")))
    : "";
  const session = await sessionFor(deps, hook, key);
  try {
    return { run: (await deps.runs.submit(session, message)).run, session };
  } catch (err) {
    // The sweep expired the keyed session meanwhile: the key moves on to a new one.
    if (!(err instanceof SessionExpiredError) || !key) throw err;
    const fresh = await newSession(deps, hook, key);
    await store.replaceSessionKey(deps.db, hook.id, key, fresh.id);
    return { run: (await deps.runs.submit(fresh, message)).run, session: fresh };
  }
}

function sessionKey(rendered: string): string {
  const key = rendered.trim();
  if (key.length <= MAX_SESSION_KEY_CHARS) return key;
  return `sha256:${createHash("sha256").update(key).digest("hex")}`;
}

/** The session the key continues (made on first use), or a new one when there is no key. */
async function sessionFor(deps: HookDeps, hook: HookRow, key: string): Promise<SessionRow> {
  const { db } = deps;
  if (!key) return newSession(deps, hook, key);
  const existing = await store.sessionForKey(db, hook.id, key);
  if (existing) {
    const session = await getSessionRow(db, existing);
    if (session && !session.expiredAt) return session;
    const fresh = await newSession(deps, hook, key);
    await store.replaceSessionKey(db, hook.id, key, fresh.id);
    return fresh;
  }
  const fresh = await newSession(deps, hook, key);
  const winner = await store.bindSessionKey(db, hook.id, key, fresh.id);
  if (winner === fresh.id) return fresh;
  // Another delivery with the same key made the session first: continue that one.
  await deleteSession(db, fresh.id);
  const session = await getSessionRow(db, winner);
  if (!session) throw new Error(`session ${winner} of key ${key} vanished`);
  return session;
}

/** Hooks act for their owner key, which may see its sessions: read without a tenant filter. */
const getSessionRow = (db: Database, id: string) =>
  getSession(db, id, { keyId: null, name: "hooks", admin: true });

function newSession(deps: HookDeps, hook: HookRow, key: string): Promise<SessionRow> {
  return createSession(deps.db, {
    ownerKeyId: hook.ownerKeyId,
    workDir: hook.workDir,
    title: key ? `${hook.name}: ${asText(key).slice(0, 150)}` : `${hook.name}`,
    agent: hookAgent(deps.config, hook),
    ...hookSettings(deps.config, hook),
    metadata: { hook: hook.name, ...(key ? { session_key: key.slice(0, 512) } : {}) },
  });
}

/** A delivery id from the sender, or a fresh one when it sent none (no duplicate detection). */
export function deliveryIdOf(given: string | undefined): string {
  return given?.trim() || randomUUID();
}
