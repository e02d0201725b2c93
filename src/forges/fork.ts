import { BYPASS_MODES } from "../auth/policy.js";
import type { ForkPolicy } from "../hook-triggers.js";
import type { PermissionMode } from "../session-settings.js";
import type { ForgeDelivery } from "./delivery.js";
import { type ForgeLookup, ForgeLookupError, repoPath } from "./lookup.js";

// The restricted policy of a run for a pull request from a fork: its code (and what its author
// wrote) is anybody's, so the run gets no bypass of permission checks and, in a sandbox, reaches
// no host unless the hook's `fork.egress` names it (and the key's list allows it too).

/** What a fork's run gets in place of the hook's own: carried on the run, so any instance sees it. */
export interface Restriction {
  permissionMode: PermissionMode;
  egress: string[];
}

/** The hook's fork policy with its defaults: the hook's mode unless it bypasses (then `default`), no egress. */
export function restrictionOf(policy: ForkPolicy | null, hookMode: PermissionMode): Restriction {
  return {
    permissionMode:
      policy?.permission_mode ?? (BYPASS_MODES.includes(hookMode) ? "default" : hookMode),
    egress: policy?.egress ?? [],
  };
}

/**
 * Whether the delivery is about a pull request from a fork. GitHub's issue comment on a pull
 * request does not say: the pull request is looked up with the hook's token, and without one (or
 * when the forge does not know it) it counts as a fork. Throws ForgeLookupError when the forge
 * could not answer and another try might.
 */
export async function fromFork(delivery: ForgeDelivery, lookup: ForgeLookup): Promise<boolean> {
  if (delivery.subject?.kind !== "pull_request") return false;
  const known = delivery.change?.fromFork;
  if (known !== null && known !== undefined) return known;
  const repo = repoPath(delivery.repository);
  if (delivery.forge !== "github" || !lookup || !repo) return true;
  const now = Date.now();
  const answer = await lookup(`/repos/${repo}/pulls/${delivery.subject.number}`);
  if (!answer.ok) {
    if (answer.final) return true;
    throw new ForgeLookupError("whether the pull request comes from a fork", answer, now);
  }
  const head = headRepo(answer.json, "head");
  const base = headRepo(answer.json, "base");
  // A head whose repository was deleted has no full_name: a fork that is gone.
  return head === null || base === null || head !== base;
}

function headRepo(pull: unknown, side: "head" | "base"): string | null {
  const name = (pull as Record<string, { repo?: { full_name?: unknown } }> | null)?.[side]?.repo
    ?.full_name;
  return typeof name === "string" ? name : null;
}
