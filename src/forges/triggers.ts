import type { PullRequestAction, Triggers } from "../hook-triggers.js";
import { type ForgeDelivery, mentions } from "./delivery.js";
import { carriesMarker } from "./marker.js";

// Which of a hook's triggers a delivery matches, read from what the delivery is about. A delivery
// that matches none says, for each trigger, why not: that is what its `ignored` record shows.

export type TriggerName = keyof Triggers;

/**
 * The trigger a delivery matched. `byPerson`: it answers what a person wrote or did (a mention, a
 * label), so the hook's `trusted` decides whether that person may.
 */
export interface TriggerMatch {
  trigger: TriggerName;
  byPerson: boolean;
}

type Json = Record<string, unknown>;
const at = (v: unknown, ...path: string[]): unknown => {
  let value = v;
  for (const key of path) {
    value =
      value !== null && typeof value === "object" && !Array.isArray(value)
        ? (value as Json)[key]
        : undefined;
  }
  return value;
};

const isGithub = (d: ForgeDelivery) => d.forge === "github";
const named = (d: ForgeDelivery) => (d.action ? `${d.event}.${d.action}` : d.event || "(none)");

function mentionMiss(handle: string, d: ForgeDelivery | null): string | null {
  if (!d) return "a delivery without a forge payload mentions nobody";
  const commented = isGithub(d)
    ? ["issue_comment", "pull_request_review_comment"].includes(d.event) && d.action === "created"
    : d.event === "note";
  const opened = isGithub(d)
    ? ["issues", "pull_request"].includes(d.event) && d.action === "opened"
    : ["merge_request", "issue"].includes(d.event) && d.action === "open";
  if (!commented && !opened) return `${named(d)} is not a new comment, issue or pull request`;
  if (!d.subject) return "it is not about an issue or a pull request";
  if (d.text === null || !mentions(d.text, handle)) return `the text does not mention ${handle}`;
  if (carriesMarker(d.text)) return "the text carries the bridge's marker: it is its own reply";
  return null;
}

function labelsMiss(labels: string[], d: ForgeDelivery | null): string | null {
  if (!d) return "a delivery without a forge payload adds no label";
  const labelled = isGithub(d)
    ? ["pull_request", "issues"].includes(d.event) && d.action === "labeled"
    : ["merge_request", "issue"].includes(d.event) && d.action === "update";
  if (!labelled) return `${named(d)} adds no label`;
  // Label names are unique regardless of case on GitHub and GitLab.
  const wanted = new Set(labels.map((l) => l.toLowerCase()));
  if (d.labelsAdded.some((l) => wanted.has(l.toLowerCase()))) return null;
  return d.labelsAdded.length === 0
    ? "it adds no label"
    : `it adds ${d.labelsAdded
        .slice(0, 5)
        .map((l) => JSON.stringify(l.slice(0, 100)))
        .join(", ")}, none of ${labels.join(", ")}`;
}

/**
 * A merge request's action in GitHub's words: `update` with new commits (`oldrev`) is
 * `synchronize`, one that takes the draft off is `ready_for_review`, a merge is `closed` too.
 */
function gitlabPullRequestAction(d: ForgeDelivery, payload: unknown): string | null {
  const attributes = at(payload, "object_attributes");
  switch (d.action) {
    case "open":
      return "opened";
    case "reopen":
      return "reopened";
    case "close":
    case "merge":
      return "closed";
    case "update":
      if (typeof at(attributes, "oldrev") === "string") return "synchronize";
      if (
        at(payload, "changes", "draft", "previous") === true &&
        at(payload, "changes", "draft", "current") === false
      ) {
        return "ready_for_review";
      }
      return null;
    default:
      return null;
  }
}

function pullRequestMiss(
  actions: PullRequestAction[],
  d: ForgeDelivery | null,
  payload: unknown,
): string | null {
  if (!d) return "a delivery without a forge payload is about no pull request";
  const action = isGithub(d)
    ? d.event === "pull_request" && d.action
    : d.event === "merge_request" && gitlabPullRequestAction(d, payload);
  if (!action) return `${named(d)} is not one of the pull request's actions`;
  return (actions as string[]).includes(action)
    ? null
    : `${action} is not in ${actions.join(", ")}`;
}

function manualMiss(d: ForgeDelivery | null): string | null {
  if (!d) return null;
  if (isGithub(d) && ["workflow_dispatch", "repository_dispatch"].includes(d.event)) return null;
  return `${named(d)} is not a dispatch`;
}

/**
 * The first of the hook's triggers that the delivery matches, or why none does. `delivery` is
 * null for a delivery that carries no forge payload (a CI step calling the bridge).
 */
export function matchTrigger(
  triggers: Triggers,
  delivery: ForgeDelivery | null,
  payload: unknown,
): TriggerMatch | { detail: string } {
  const misses: string[] = [];
  const check = (trigger: TriggerName, miss: string | null, byPerson: boolean) => {
    if (miss === null) return { trigger, byPerson };
    misses.push(`${trigger}: ${miss}`);
    return null;
  };
  const match =
    (triggers.mention !== undefined &&
      check("mention", mentionMiss(triggers.mention, delivery), true)) ||
    (triggers.labels !== undefined &&
      check("labels", labelsMiss(triggers.labels, delivery), true)) ||
    (triggers.pull_request !== undefined &&
      check("pull_request", pullRequestMiss(triggers.pull_request, delivery, payload), false)) ||
    (triggers.manual === true && check("manual", manualMiss(delivery), false));
  return match || { detail: `no trigger matches (${misses.join("; ")})` };
}
