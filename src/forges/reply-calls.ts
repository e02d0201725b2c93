import type { ReplyTarget } from "../store/schema.js";
import type { ForgeCall } from "./api.js";
import { REPLY_MARKER } from "./marker.js";
import {
  checkOutput,
  commentBody,
  type ReviewComment,
  type RunReport,
  reviewBody,
  statusDescription,
} from "./reply-body.js";

// The forge API call that sends a reply as it stands: create the comment, the note or the check
// run, or update the one created before; set the commit status; post the review. Every path is
// built from parts checked here, never from a payload's text as it came: a repository name with
// `..` or a `?` in it would send the hook's token somewhere else on the API.

export interface ReplyToSend {
  kind: string;
  target: ReplyTarget;
  /** The comment's, note's or check run's id once created. */
  objectId: string | null;
}

export type ReplyCall =
  | { call: ForgeCall; body: string }
  /** Nothing to send (a review without line comments): why. */
  | { skip: string };

/** The segments of a repository's path when each is a plain name (not `.` or `..`), else null. */
function plainSegments(repository: string | null): string[] | null {
  const parts = repository?.split("/") ?? [];
  const plain = (p: string) => /^[A-Za-z0-9_.-]+$/.test(p) && !/^\.+$/.test(p);
  return parts.length > 0 && parts.every(plain) ? parts : null;
}

/** `/repos/owner/name` for a repository name of two plain segments, else null. */
function githubRepo(target: ReplyTarget): string | null {
  const parts = plainSegments(target.repository);
  return parts?.length === 2 ? `/repos/${parts.join("/")}` : null;
}

/** `/projects/<id>`, or the URL-encoded path of plain segments when the payload had no id. */
function gitlabProject(target: ReplyTarget): string | null {
  if (target.projectId !== null) return `/projects/${target.projectId}`;
  const parts = plainSegments(target.repository);
  return parts ? `/projects/${encodeURIComponent(parts.join("/"))}` : null;
}

const safeId = (id: string) => (/^\d{1,20}$/.test(id) ? id : null);
const safeSha = (sha: string | null) => (sha && /^[0-9a-f]{7,64}$/i.test(sha) ? sha : null);

export class UnusableTargetError extends Error {}

/** The API path that answers the pull (merge) request's head commit, and how to read it. */
export function headLookup(target: ReplyTarget): {
  path: string;
  read: (json: unknown) => unknown;
} {
  const { number } = target.subject;
  if (target.forge === "github") {
    const repo = githubRepo(target);
    if (!repo) throw new UnusableTargetError("the repository's name is not usable");
    return {
      path: `${repo}/pulls/${number}`,
      read: (json) => (json as { head?: { sha?: unknown } } | null)?.head?.sha,
    };
  }
  const project = gitlabProject(target);
  if (!project) throw new UnusableTargetError("the delivery names no project");
  return {
    path: `${project}/merge_requests/${number}`,
    read: (json) => (json as { sha?: unknown } | null)?.sha,
  };
}

export function replyCall(
  reply: ReplyToSend,
  report: RunReport,
  review: readonly ReviewComment[],
): ReplyCall {
  const { target } = reply;
  return target.forge === "github"
    ? githubCall(reply, report, review)
    : gitlabCall(reply, report, review);
}

function githubCall(
  reply: ReplyToSend,
  report: RunReport,
  review: readonly ReviewComment[],
): ReplyCall {
  const { target } = reply;
  const repo = githubRepo(target);
  if (!repo) throw new UnusableTargetError("the repository's name is not usable");
  const objectId = reply.objectId && safeId(reply.objectId);
  const end = report.end;
  switch (reply.kind) {
    case "comment": {
      const body = commentBody(report);
      return objectId
        ? {
            call: { method: "PATCH", path: `${repo}/issues/comments/${objectId}`, body: { body } },
            body,
          }
        : {
            call: {
              method: "POST",
              path: `${repo}/issues/${target.subject.number}/comments`,
              body: { body },
            },
            body,
          };
    }
    case "check": {
      const sha = needSha(target);
      const output = checkOutput(report);
      const fields = {
        name: target.name,
        head_sha: sha,
        external_id: report.runId,
        output,
        ...(end
          ? { status: "completed", conclusion: checkConclusion(end.status) }
          : { status: "in_progress" }),
      };
      const call: ForgeCall = objectId
        ? { method: "PATCH", path: `${repo}/check-runs/${objectId}`, body: fields }
        : { method: "POST", path: `${repo}/check-runs`, body: fields };
      return { call, body: output.summary };
    }
    case "status": {
      const sha = needSha(target);
      const description = statusDescription(report);
      const state = end ? githubStatus(end.status) : "pending";
      return {
        call: {
          method: "POST",
          path: `${repo}/statuses/${sha}`,
          body: { state, context: target.name, description },
        },
        body: description,
      };
    }
    case "review": {
      if (review.length === 0) return { skip: "the result carries no review_comments" };
      const body = reviewBody(report, review, true);
      const sha = safeSha(target.sha);
      return {
        call: {
          method: "POST",
          path: `${repo}/pulls/${target.subject.number}/reviews`,
          body: {
            event: "COMMENT",
            body,
            ...(sha ? { commit_id: sha } : {}),
            comments: review.map((c) => ({
              path: c.path,
              line: c.line,
              side: "RIGHT",
              // Each becomes a review comment of its own, which a mention trigger reads.
              body: `${c.body}\n\n${REPLY_MARKER}`,
            })),
          },
        },
        body,
      };
    }
    default:
      throw new UnusableTargetError(`GitHub has no reply of kind ${reply.kind}`);
  }
}

function gitlabCall(
  reply: ReplyToSend,
  report: RunReport,
  review: readonly ReviewComment[],
): ReplyCall {
  const { target } = reply;
  const project = gitlabProject(target);
  if (!project) throw new UnusableTargetError("the delivery names no project");
  const noteable = `${project}/${target.subject.kind === "pull_request" ? "merge_requests" : "issues"}/${target.subject.number}/notes`;
  const objectId = reply.objectId && safeId(reply.objectId);
  const end = report.end;
  switch (reply.kind) {
    case "comment": {
      const body = commentBody(report);
      return objectId
        ? { call: { method: "PUT", path: `${noteable}/${objectId}`, body: { body } }, body }
        : { call: { method: "POST", path: noteable, body: { body } }, body };
    }
    case "status": {
      const sha = needSha(target);
      const description = statusDescription(report);
      const state = end ? gitlabStatus(end.status) : "running";
      return {
        call: {
          method: "POST",
          path: `${project}/statuses/${sha}`,
          body: { state, name: target.name, description },
        },
        body: description,
      };
    }
    case "review": {
      // A line comment on a merge request needs a diff position (base, start and head shas and
      // the old and new paths): the review's comments go as one note that names each line.
      if (review.length === 0) return { skip: "the result carries no review_comments" };
      const body = reviewBody(report, review, false);
      return { call: { method: "POST", path: noteable, body: { body } }, body };
    }
    default:
      throw new UnusableTargetError(`GitLab has no reply of kind ${reply.kind}`);
  }
}

function needSha(target: ReplyTarget): string {
  const sha = safeSha(target.sha);
  if (!sha) throw new UnusableTargetError("the change's head commit is not known");
  return sha;
}

const checkConclusion = (status: string) =>
  status === "succeeded" ? "success" : status === "cancelled" ? "cancelled" : "failure";
const githubStatus = (status: string) =>
  status === "succeeded" ? "success" : status === "cancelled" ? "error" : "failure";
const gitlabStatus = (status: string) =>
  status === "succeeded" ? "success" : status === "cancelled" ? "canceled" : "failed";
