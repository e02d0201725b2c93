import type { Trusted } from "../hook-triggers.js";
import type { ForgeDelivery } from "./delivery.js";
import { type ForgeLookup, ForgeLookupError, repoPath } from "./lookup.js";
import type { TriggerName } from "./triggers.js";

// Who may trigger a hook by what they wrote or did (a mention, a label). GitHub says in the
// payload how the author of a comment, issue or pull request relates to the repository
// (`author_association`); for a label it does not, and the hook's token asks for the labeller's
// permission. GitLab's payload says nothing of the kind: the token asks for the member's access
// level. A bot may trigger only when the hook lists it, which keeps the bridge's own replies (and
// other automation) from starting runs.

export const TRUST_DEFAULTS: Required<Trusted> = {
  associations: ["OWNER", "MEMBER", "COLLABORATOR"],
  bots: [],
  gitlab_access_level: 30,
};

export const trustOf = (stored: Trusted | null): Required<Trusted> => ({
  ...TRUST_DEFAULTS,
  ...stored,
});

/** GitHub repository permissions that let a labeller trigger: those that can push. */
const LABELLER_PERMISSIONS = ["admin", "maintain", "write"];

export type TrustVerdict = { trusted: true } | { trusted: false; detail: string };

const refused = (detail: string): TrustVerdict => ({ trusted: false, detail });

/** A login as written or as its bot account (`renovate` is `renovate[bot]`), case aside. */
const botName = (login: string) => login.toLowerCase().replace(/\[bot\]$/, "");

/**
 * Whether the person behind the delivery may trigger the hook. Throws ForgeLookupError when the
 * forge's API could not answer and another try might (or the token was refused).
 */
export async function mayTrigger(
  trusted: Required<Trusted>,
  delivery: ForgeDelivery,
  trigger: TriggerName,
  lookup: ForgeLookup,
): Promise<TrustVerdict> {
  const actor = delivery.actor;
  if (!actor) return refused("the delivery names nobody who did it");
  const who = `@${actor.login.slice(0, 100)}`;
  // A listed name trusts the bot account alone, never a person who took the same name.
  if (actor.bot && trusted.bots.some((bot) => botName(bot) === botName(actor.login))) {
    return { trusted: true };
  }
  if (actor.bot) return refused(`${who} is a bot not listed in trusted.bots`);
  if (delivery.forge === "gitlab") return gitlabMember(trusted, delivery, who, lookup);
  if (trigger === "labels") return githubLabeller(delivery, who, lookup);
  const association = actor.association;
  if (association && (trusted.associations as string[]).includes(association)) {
    return { trusted: true };
  }
  return refused(
    `${who} is ${association ? association.slice(0, 40) : "of no stated association"}, not one of ${trusted.associations.join(", ")} (trusted.associations)`,
  );
}

/**
 * GitHub lets only those with triage access or more label; with a token the labeller must also
 * be able to push (write, maintain, admin), as a collaborator can. Without a token, GitHub's own
 * rule is the check.
 */
async function githubLabeller(
  delivery: ForgeDelivery,
  who: string,
  lookup: ForgeLookup,
): Promise<TrustVerdict> {
  const login = delivery.actor?.login ?? "";
  if (!lookup) return { trusted: true };
  const repo = repoPath(delivery.repository);
  if (!repo) return refused("the delivery names no repository to look the labeller up in");
  const now = Date.now();
  const answer = await lookup(
    `/repos/${repo}/collaborators/${encodeURIComponent(login)}/permission`,
  );
  if (!answer.ok) {
    if (answer.status === 404)
      return refused(`${who} is no collaborator of ${delivery.repository}`);
    throw new ForgeLookupError(`whether ${who} may trigger the hook`, answer, now);
  }
  const permission = (answer.json as { permission?: unknown } | null)?.permission;
  if (typeof permission === "string" && LABELLER_PERMISSIONS.includes(permission)) {
    return { trusted: true };
  }
  return refused(
    `${who} has ${typeof permission === "string" ? permission.slice(0, 40) : "no"} permission on the repository, not write or more`,
  );
}

async function gitlabMember(
  trusted: Required<Trusted>,
  delivery: ForgeDelivery,
  who: string,
  lookup: ForgeLookup,
): Promise<TrustVerdict> {
  if (!lookup) {
    return refused(
      "the hook needs a forge_token to check who may trigger it: GitLab's payload carries no access level",
    );
  }
  const userId = delivery.actor?.id;
  if (!userId || !delivery.projectId) return refused("the delivery names no project or user id");
  const now = Date.now();
  const answer = await lookup(`/projects/${delivery.projectId}/members/all/${userId}`);
  if (!answer.ok) {
    if (answer.status === 404) return refused(`${who} is no member of the project`);
    throw new ForgeLookupError(`whether ${who} may trigger the hook`, answer, now);
  }
  const level = (answer.json as { access_level?: unknown } | null)?.access_level;
  if (typeof level === "number" && level >= trusted.gitlab_access_level) return { trusted: true };
  return refused(
    `${who} has access level ${typeof level === "number" ? level : "unknown"}, below ${trusted.gitlab_access_level} (trusted.gitlab_access_level)`,
  );
}
