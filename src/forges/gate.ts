import type { CallbackTargets } from "../net/targets.js";
import type { PermissionMode } from "../session-settings.js";
import type { HookRow } from "../store/schema.js";
import { callForge } from "./api.js";
import { type ForgeDelivery, readDelivery } from "./delivery.js";
import { fromFork, type Restriction, restrictionOf } from "./fork.js";
import { forgeAccessOf, forgeOf } from "./hook-forge.js";
import type { ForgeLookup } from "./lookup.js";
import { matchTrigger } from "./triggers.js";
import { mayTrigger, trustOf } from "./trust.js";

// Whether a verified delivery of a hook starts a run, and under which policy: its triggers
// matched, by someone the hook trusts, and a pull request from a fork restricted. A hook without
// triggers runs every delivery its `events` let through, as it always did; its `fork`, when set,
// still restricts a fork's run.

export type GateVerdict =
  | { run: true; restriction: Restriction | null }
  | { run: false; detail: string };

export interface GateOptions {
  targets: CallbackTargets;
  timeoutMs: number;
  /** The permission mode the hook's sessions get (its own, or the server's default). */
  hookMode: () => PermissionMode;
}

/** How the gate reads the hook's columns: as they were written through the API's schema. */
type GatedHook = Pick<
  HookRow,
  | "verification"
  | "forge"
  | "forgeApiUrl"
  | "forgeToken"
  | "triggers"
  | "trusted"
  | "fork"
  | "checkout"
>;

/**
 * A delivery of a `standard` or `bearer` hook whose payload is about no repository and no issue
 * or pull request carries no forge payload (a CI step calling the bridge): null.
 */
function deliveryOf(hook: GatedHook, event: string, payload: unknown): ForgeDelivery | null {
  const forge = forgeOf(hook);
  if (!forge) return null;
  const delivery = readDelivery(forge, event, payload);
  const forgeVerified = hook.verification === "github" || hook.verification === "gitlab";
  if (!forgeVerified && delivery.repository === null && delivery.subject === null) return null;
  return delivery;
}

/** Throws ForgeLookupError when the forge's API could not answer what the gate had to know. */
export async function gateDelivery(
  hook: GatedHook,
  input: { event: string; payload: unknown },
  opts: GateOptions,
): Promise<GateVerdict> {
  // A hook that checks pull requests out runs their code: a fork's is anybody's, with triggers or without.
  if (!hook.triggers && !hook.fork && !hook.checkout) return { run: true, restriction: null };
  const delivery = deliveryOf(hook, input.event, input.payload);
  const access = forgeAccessOf(hook);
  const lookup: ForgeLookup =
    access &&
    ((path) =>
      callForge(
        access,
        { method: "GET", path },
        {
          targets: opts.targets,
          timeoutMs: opts.timeoutMs,
          // Part of the delivery's request, bounded by its timeout.
          stopping: new AbortController().signal,
          clock: Date.now,
        },
      ));
  if (hook.triggers) {
    const match = matchTrigger(hook.triggers, delivery, input.payload);
    if ("detail" in match) return { run: false, detail: match.detail };
    if (match.byPerson && delivery) {
      const verdict = await mayTrigger(trustOf(hook.trusted), delivery, match.trigger, lookup);
      if (!verdict.trusted) return { run: false, detail: verdict.detail };
    }
  }
  const forked = delivery !== null && (await fromFork(delivery, lookup));
  return {
    run: true,
    restriction: forked ? restrictionOf(hook.fork, opts.hookMode()) : null,
  };
}
