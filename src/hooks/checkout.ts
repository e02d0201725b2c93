import { DomainError } from "../errors.js";
import { readDelivery } from "../forges/delivery.js";
import { forgeOf } from "../forges/hook-forge.js";
import { CallbackTargets, type Cidr } from "../net/targets.js";
import type { HookRow } from "../store/schema.js";
import { type ChangeCheckout, isChangeNumber, MAX_CHANGE_NUMBER } from "../worktrees/change.js";
import { isLocalOrigin, originRefusal } from "../worktrees/checkout-origin.js";
import type { Git } from "../worktrees/git.js";

// A hook's `checkout`: which pull (merge) request a delivery's run works on, and the template
// names that tell its prompt about that request.

export const CHECKOUT_KINDS = ["pull_request"] as const;

/** A delivery on a checkout hook that names no pull request whose head can be checked out. */
export class NotAPullRequestError extends DomainError {
  constructor(hook: string, why: string) {
    super(
      "checkout_unavailable",
      `hook ${hook} checks pull requests out, and this delivery ${why}: no run was started`,
    );
  }
}

/**
 * The request a delivery's run checks out, for a hook with `checkout`; null for a hook without.
 * A delivery about anything else (a push, an issue) is refused with NotAPullRequestError, as is
 * a number past what a forge gives out (readDelivery already took only positive safe integers).
 */
export function checkoutFor(
  hook: Pick<HookRow, "id" | "name" | "checkout" | "forge">,
  event: string,
  payload: unknown,
): ChangeCheckout | null {
  if (hook.checkout === null) return null;
  const forge = forgeOf(hook);
  if (!forge) throw new NotAPullRequestError(hook.name, "comes to a hook without a forge");
  const { subject } = readDelivery(forge, event, payload);
  if (subject?.kind !== "pull_request") {
    throw new NotAPullRequestError(hook.name, "is not about a pull or merge request");
  }
  if (!isChangeNumber(subject.number)) {
    throw new NotAPullRequestError(
      hook.name,
      `names a request number past ${MAX_CHANGE_NUMBER}, which no forge gives out`,
    );
  }
  return { forge, number: subject.number, hook: hook.id };
}

/**
 * The origin a checkout hook pins, as its admin makes or changes it: the one given (or kept), else
 * the work dir repository's `origin` as it reads now (shown on the hook, so that the admin sees
 * what a tenant's config said). Never read again at fetch time. An https:// address is held to the
 * callbacks' rules for an address written in it.
 */
export async function pinnedOrigin(
  given: string | undefined,
  workDir: Git,
  rules: { localRoots: readonly string[]; allow: readonly Cidr[] },
): Promise<{ origin: string } | { refusal: string }> {
  const origin = given ?? (await workDir.maybe(["remote", "get-url", "origin"]));
  if (origin === undefined) return { refusal: "the work dir's repository names no origin" };
  const refusal =
    originRefusal(origin, rules.localRoots) ??
    (isLocalOrigin(origin) ? undefined : new CallbackTargets(rules.allow).urlRefusal(origin));
  if (!refusal) return { origin };
  const whose = given === undefined ? `the work dir's origin ${JSON.stringify(origin)}` : "it";
  return { refusal: `${whose} cannot be fetched from: ${refusal}` };
}

/** The template names of a delivery's pull (merge) request. */
export const CHANGE_TEMPLATE_NAMES = [
  "pull_request.number",
  "pull_request.head_sha",
  "pull_request.head_ref",
  "pull_request.base_ref",
] as const;

export type ChangeNames = Record<(typeof CHANGE_TEMPLATE_NAMES)[number], string>;

export const NO_CHANGE: ChangeNames = {
  "pull_request.number": "",
  "pull_request.head_sha": "",
  "pull_request.head_ref": "",
  "pull_request.base_ref": "",
};

/**
 * What a delivery says of its pull (merge) request, as template values; empty where it says
 * nothing (an issue comment carries the number alone, a push nothing).
 */
export function changeNames(
  hook: Pick<HookRow, "forge">,
  event: string,
  payload: unknown,
): ChangeNames {
  const forge = forgeOf(hook);
  const { subject, change } = forge
    ? readDelivery(forge, event, payload)
    : { subject: null, change: null };
  return {
    "pull_request.number": subject?.kind === "pull_request" ? String(subject.number) : "",
    "pull_request.head_sha": change?.headSha ?? "",
    "pull_request.head_ref": change?.headRef ?? "",
    "pull_request.base_ref": change?.baseRef ?? "",
  };
}
