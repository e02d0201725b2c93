import type { PERMISSION_MODES } from "./permission-modes.js";

// What a hook stores of its triggers, of whom it trusts and of its policy for a fork's pull
// request, as plain values: the hooks table types its columns with them, the API's schemas build
// their enums of them, and src/forges/ decides with them.

export const PULL_REQUEST_ACTIONS = [
  "opened",
  "synchronize",
  "reopened",
  "ready_for_review",
  "closed",
] as const;
export type PullRequestAction = (typeof PULL_REQUEST_ACTIONS)[number];

/** A hook's `triggers`: a delivery runs when it matches one of them. */
export interface Triggers {
  /** A handle (`@agent-bridge`) that a new comment, issue or pull request mentions. */
  mention?: string;
  /** Labels one of which a pull request or issue was given. */
  labels?: string[];
  /** Pull (merge) request actions, in GitHub's words. */
  pull_request?: PullRequestAction[];
  /** Workflow or repository dispatches, and deliveries that carry no forge payload at all. */
  manual?: boolean;
}

export const GITHUB_ASSOCIATIONS = [
  "OWNER",
  "MEMBER",
  "COLLABORATOR",
  "CONTRIBUTOR",
  "FIRST_TIME_CONTRIBUTOR",
  "FIRST_TIMER",
  "MANNEQUIN",
  "NONE",
] as const;
export type GithubAssociation = (typeof GITHUB_ASSOCIATIONS)[number];

/** GitLab's access levels: Guest 10, Planner 15, Reporter 20, Developer 30, Maintainer 40, Owner 50. */
export const GITLAB_ACCESS_LEVELS = [10, 15, 20, 30, 40, 50] as const;

/** A hook's `trusted`: who may trigger it by what they wrote or did. */
export interface Trusted {
  associations?: GithubAssociation[];
  bots?: string[];
  gitlab_access_level?: (typeof GITLAB_ACCESS_LEVELS)[number];
}

/** A hook's `fork`: what a run for a pull request from a fork gets. */
export interface ForkPolicy {
  permission_mode?: (typeof PERMISSION_MODES)[number];
  egress?: string[];
}
