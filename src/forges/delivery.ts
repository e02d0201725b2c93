// What a GitHub or GitLab webhook delivery is about, read once from its payload: the repository,
// the issue or pull (merge) request, the change's head, who did it and what they wrote. Triggers
// decide from this whether a delivery starts a run; replies find from it where to post. Nothing
// here trusts a field's type: a payload is whatever the sender (or an attacker with the secret)
// sent, so a field of the wrong type reads as absent.

export const FORGES = ["github", "gitlab"] as const;
export type Forge = (typeof FORGES)[number];

export interface Actor {
  login: string;
  /** A GitHub App or bot account (`type: "Bot"`, `[bot]` suffix), or a GitLab bot user. */
  bot: boolean;
  /** GitHub's `author_association` of what the actor wrote (comment, issue, pull request). */
  association: string | null;
  /** GitLab's user id, for looking up the member's access level. */
  id: number | null;
}

/** A pull request (GitHub) or merge request (GitLab): what its run may check out and reply on. */
export interface Change {
  /** Known when the payload carries it (pull_request events, not issue comments). */
  headSha: string | null;
  headRef: string | null;
  baseRef: string | null;
  /** The head lives in another repository than the base. Unknown (null) without the head's repo. */
  fromFork: boolean | null;
}

export interface ForgeDelivery {
  forge: Forge;
  /** GitHub's `X-GitHub-Event`, GitLab's `object_kind` (`note`, `merge_request`, `issue`…). */
  event: string;
  action: string | null;
  /** `owner/name` on GitHub, the project's `path_with_namespace` on GitLab. */
  repository: string | null;
  /** GitLab's project id (its API addresses projects by it); null on GitHub. */
  projectId: number | null;
  /** The issue or pull request the delivery is about (its number; a merge request's `iid`). */
  subject: { kind: "pull_request" | "issue"; number: number } | null;
  change: Change | null;
  actor: Actor | null;
  /** What a person wrote that this delivery carries: a comment's body, a new issue's text. */
  text: string | null;
  /** The label this delivery added (`labeled`; GitLab: the labels added by this update). */
  labelsAdded: string[];
}

type Json = Record<string, unknown>;

const obj = (v: unknown): Json | null =>
  v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Json) : null;
const str = (v: unknown): string | null => (typeof v === "string" ? v : null);
const num = (v: unknown): number | null =>
  typeof v === "number" && Number.isSafeInteger(v) && v > 0 ? v : null;
const at = (v: unknown, ...path: string[]): unknown => {
  let value = v;
  for (const key of path) value = obj(value)?.[key];
  return value;
};

export function readDelivery(forge: Forge, event: string, payload: unknown): ForgeDelivery {
  return forge === "github" ? readGithub(event, payload) : readGitlab(payload);
}

function githubActor(user: unknown, association: unknown): Actor | null {
  const login = str(at(user, "login"));
  if (!login) return null;
  return {
    login,
    bot: at(user, "type") === "Bot" || login.endsWith("[bot]"),
    association: str(association),
    id: num(at(user, "id")),
  };
}

function githubChange(pr: unknown): Change {
  const headRepo = str(at(pr, "head", "repo", "full_name"));
  const baseRepo = str(at(pr, "base", "repo", "full_name"));
  return {
    headSha: str(at(pr, "head", "sha")),
    headRef: str(at(pr, "head", "ref")),
    baseRef: str(at(pr, "base", "ref")),
    fromFork: headRepo && baseRepo ? headRepo !== baseRepo : null,
  };
}

function readGithub(event: string, payload: unknown): ForgeDelivery {
  const delivery: ForgeDelivery = {
    forge: "github",
    event,
    action: str(at(payload, "action")),
    repository: str(at(payload, "repository", "full_name")),
    projectId: null,
    subject: null,
    change: null,
    actor: githubActor(at(payload, "sender"), null),
    text: null,
    labelsAdded: [],
  };
  const pr = at(payload, "pull_request");
  const issue = at(payload, "issue");
  const comment = at(payload, "comment");
  const label = str(at(payload, "label", "name"));
  if (delivery.action === "labeled" && label) delivery.labelsAdded = [label];
  if (obj(pr)) {
    const number = num(at(pr, "number"));
    if (number) delivery.subject = { kind: "pull_request", number };
    delivery.change = githubChange(pr);
  } else if (obj(issue)) {
    const number = num(at(issue, "number"));
    // An issue comment on a pull request names it under `issue`, with `issue.pull_request` set.
    const kind = obj(at(issue, "pull_request")) ? "pull_request" : "issue";
    if (number) delivery.subject = { kind, number };
    if (kind === "pull_request") {
      delivery.change = { headSha: null, headRef: null, baseRef: null, fromFork: null };
    }
  }
  if (obj(comment)) {
    delivery.text = str(at(comment, "body"));
    delivery.actor = githubActor(at(comment, "user"), at(comment, "author_association"));
  } else if (delivery.action === "opened" || delivery.action === "edited") {
    // A new pull request or issue: its author wrote its text.
    const item = obj(pr) ?? obj(issue);
    delivery.text = str(at(item, "body"));
    delivery.actor = githubActor(at(item, "user"), at(item, "author_association"));
  } else if (obj(pr) && delivery.action === "synchronize") {
    // New commits: whoever pushed them is the sender; the association is the author's.
    delivery.actor = githubActor(at(payload, "sender"), at(pr, "author_association"));
  }
  return delivery;
}

function gitlabChange(mr: unknown): Change {
  const source = num(at(mr, "source_project_id"));
  const target = num(at(mr, "target_project_id"));
  return {
    headSha: str(at(mr, "last_commit", "id")),
    headRef: str(at(mr, "source_branch")),
    baseRef: str(at(mr, "target_branch")),
    fromFork: source && target ? source !== target : null,
  };
}

function readGitlab(payload: unknown): ForgeDelivery {
  const kind = str(at(payload, "object_kind")) ?? "";
  const attributes = at(payload, "object_attributes");
  const user = at(payload, "user");
  const login = str(at(user, "username"));
  const delivery: ForgeDelivery = {
    forge: "gitlab",
    event: kind,
    action: str(at(attributes, "action")),
    repository: str(at(payload, "project", "path_with_namespace")),
    projectId: num(at(payload, "project", "id")) ?? num(at(payload, "project_id")),
    subject: null,
    change: null,
    actor: login
      ? {
          login,
          bot: at(user, "bot") === true || /^(project|group)_\d+_bot/.test(login),
          association: null,
          id: num(at(user, "id")),
        }
      : null,
    text: null,
    labelsAdded: addedLabels(payload),
  };
  if (kind === "merge_request") {
    const iid = num(at(attributes, "iid"));
    if (iid) delivery.subject = { kind: "pull_request", number: iid };
    delivery.change = gitlabChange(attributes);
    if (delivery.action === "open") delivery.text = str(at(attributes, "description"));
  } else if (kind === "issue") {
    const iid = num(at(attributes, "iid"));
    if (iid) delivery.subject = { kind: "issue", number: iid };
    if (delivery.action === "open") delivery.text = str(at(attributes, "description"));
  } else if (kind === "note") {
    delivery.text = str(at(attributes, "note"));
    const noteable = at(attributes, "noteable_type");
    const mr = at(payload, "merge_request");
    if (noteable === "MergeRequest" && obj(mr)) {
      const iid = num(at(mr, "iid"));
      if (iid) delivery.subject = { kind: "pull_request", number: iid };
      delivery.change = gitlabChange(mr);
    } else if (noteable === "Issue") {
      const iid = num(at(payload, "issue", "iid"));
      if (iid) delivery.subject = { kind: "issue", number: iid };
    }
  }
  return delivery;
}

/** The labels a GitLab merge request or issue update added (`changes.labels` before and after). */
function addedLabels(payload: unknown): string[] {
  const titles = (list: unknown) =>
    Array.isArray(list) ? list.map((l) => str(at(l, "title"))).filter((t) => t !== null) : [];
  const before = new Set(titles(at(payload, "changes", "labels", "previous")));
  return titles(at(payload, "changes", "labels", "current")).filter((t) => !before.has(t));
}

/** Whether `text` mentions `handle` (`@agent-bridge`) as a word: not inside `@agent-bridge-x`. */
export function mentions(text: string, handle: string): boolean {
  const name = handle.replace(/^@/, "").toLowerCase();
  if (!name) return false;
  const lower = text.toLowerCase();
  for (let i = lower.indexOf(`@${name}`); i !== -1; i = lower.indexOf(`@${name}`, i + 1)) {
    const before = i === 0 ? "" : (lower[i - 1] ?? "");
    const after = lower[i + name.length + 1] ?? "";
    if (!/[a-z0-9_-]/.test(before) && !/[a-z0-9_-]/.test(after)) return true;
  }
  return false;
}
