import { describe, expect, it } from "vitest";
import { REPLY_MARKER } from "../../src/forges/marker.js";
import {
  checkOutput,
  commentBody,
  cut,
  type RunReport,
  readRunEnd,
  reviewComments,
  statusDescription,
} from "../../src/forges/reply-body.js";
import { headLookup, replyCall, UnusableTargetError } from "../../src/forges/reply-calls.js";
import { planReplies, replySettings } from "../../src/forges/reply-plan.js";
import type { ReplyTarget } from "../../src/store/schema.js";

// What a run's replies say and where they go: bodies that carry the marker and cannot be broken
// out of, payload values that never become part of an API path, and the plan a delivery gets.

const RUN = "6f1c2d3e-4b5a-4c3d-8e4f-1a2b3c4d5e6f";
const SHA = "0123456789abcdef0123456789abcdef01234567";

const report = (end: Partial<NonNullable<RunReport["end"]>> | null, tools: string[] = []) => ({
  runId: RUN,
  status: "running",
  tools,
  end: end && {
    status: "succeeded",
    result: "Done.",
    error: null,
    costUsd: null,
    durationMs: null,
    structuredOutput: undefined,
    ...end,
  },
});

const target = (over: Partial<ReplyTarget> = {}): ReplyTarget => ({
  forge: "github",
  repository: "acme/widgets",
  projectId: null,
  subject: { kind: "pull_request", number: 7 },
  sha: SHA,
  name: "agent-bridge/h",
  ...over,
});

describe("reply bodies", () => {
  it("say the run's progress with each tool counted, and its result with a footer naming the run", () => {
    const progress = commentBody(report(null, ["Bash", "Read", "Bash"]));
    expect(progress.startsWith(REPLY_MARKER)).toBe(true);
    expect(progress).toContain("`Bash` ×2, `Read`");
    const final = commentBody(report({ costUsd: 0.5, durationMs: 1500 }));
    expect(final).toContain("Done.");
    expect(final).toContain(`succeeded · $0.5000 · 1.5 s · agent-bridge run ${RUN}`);
    expect(final).not.toMatch(/https?:\/\//);
  });

  it("fold the structured output in a fence its own backticks cannot close", () => {
    const body = commentBody(report({ structuredOutput: { text: "```\n</details>" } }));
    const fence = /(`{4,})json\n/.exec(body)?.[1];
    expect(fence).toBeDefined();
    expect(body.split(fence ?? "")).toHaveLength(3);
    expect(body).toContain("<details><summary>Structured output</summary>");
  });

  it("say a structured output's summary in place of the run's text, which is its answer as JSON", () => {
    const structuredOutput = { summary: "Two issues in the parser.", verdict: "comment" };
    const body = commentBody(
      report({ result: JSON.stringify(structuredOutput), structuredOutput }),
    );
    expect(body).toMatch(new RegExp(`^${REPLY_MARKER}\nTwo issues in the parser.\n`));
    expect(checkOutput(report({ structuredOutput })).summary).toMatch(/^Two issues/);
    const noSummary = commentBody(report({ result: "{}", structuredOutput: { summary: 3 } }));
    expect(noSummary).toMatch(new RegExp(`^${REPLY_MARKER}\n{}`));
  });

  it("say the error of a run that failed", () => {
    expect(commentBody(report({ status: "timed_out", error: "took too long" }))).toMatch(
      /The run timed out\.\*\*\n\ntook too long/,
    );
  });

  it("replace lone surrogates and drop NUL, and cut a huge result without splitting a pair", () => {
    const body = commentBody(report({ result: `a\u0000b\ud800c` }));
    expect(body).toContain("ab\ufffdc");
    const cutText = cut(`${"x".repeat(9)}😀`, 10);
    expect(cutText).toBe(`${"x".repeat(9)}…`);
    const huge = commentBody(report({ result: "y".repeat(1_000_000) }));
    expect(huge.length).toBeLessThan(65_536);
  });

  it("read a completion defensively: a wrong type is absent, and anything else is no end", () => {
    expect(readRunEnd({ status: "succeeded", result: 5, cost_usd: "1" })).toEqual({
      status: "succeeded",
      result: null,
      error: null,
      costUsd: null,
      durationMs: null,
      structuredOutput: undefined,
    });
    expect(readRunEnd(null)).toBeNull();
    expect(readRunEnd(["status"])).toBeNull();
  });

  it("take review comments of the right shape only, at most 50", () => {
    expect(reviewComments("text")).toEqual([]);
    expect(reviewComments({ review_comments: {} })).toEqual([]);
    const many = Array.from({ length: 80 }, (_, i) => ({ path: "a.ts", line: i + 1, body: "x" }));
    expect(reviewComments({ review_comments: many })).toHaveLength(50);
    expect(
      reviewComments({
        review_comments: [
          { path: "a\u0000.ts", line: 1, body: "x" },
          { path: "a.ts", line: 1.5, body: "x" },
          { path: "a.ts", line: 2 ** 60, body: "x" },
          { path: "", line: 1, body: "x" },
        ],
      }),
    ).toEqual([]);
  });

  it("keep a commit status's description within GitHub's 140 characters", () => {
    expect(statusDescription(report({ status: "x".repeat(500) })).length).toBeLessThanOrEqual(141);
  });
});

describe("reply calls", () => {
  it("create a comment, then update the same one", () => {
    const made = replyCall({ kind: "comment", target: target(), objectId: null }, report(null), []);
    expect("call" in made && made.call).toMatchObject({
      method: "POST",
      path: "/repos/acme/widgets/issues/7/comments",
    });
    const updated = replyCall(
      { kind: "comment", target: target(), objectId: "42" },
      report(null),
      [],
    );
    expect("call" in updated && updated.call).toMatchObject({
      method: "PATCH",
      path: "/repos/acme/widgets/issues/comments/42",
    });
  });

  it("never put a payload's repository, project or sha into a path as it came", () => {
    for (const repository of ["acme/../../user", "acme/w?x=1", "acme/w/extra", "../x", "a/.."]) {
      expect(() =>
        replyCall(
          { kind: "comment", target: target({ repository }), objectId: null },
          report(null),
          [],
        ),
      ).toThrow(UnusableTargetError);
      expect(() => headLookup(target({ repository }))).toThrow(UnusableTargetError);
    }
    expect(() =>
      replyCall(
        { kind: "status", target: target({ sha: "../../x" }), objectId: null },
        report(null),
        [],
      ),
    ).toThrow(UnusableTargetError);
    const onGitlab = (repository: string, objectId: string | null) =>
      replyCall(
        {
          kind: "comment",
          target: target({ forge: "gitlab", projectId: null, repository }),
          objectId,
        },
        report(null),
        [],
      );
    for (const repository of ["..", "group/../../admin", "group/./x", "a?b"]) {
      expect(() => onGitlab(repository, null)).toThrow(UnusableTargetError);
    }
    // A nested group's path is one encoded segment; an id that is no number is not used.
    expect(onGitlab("group/sub/proj", "1/../x")).toMatchObject({
      call: { method: "POST", path: "/projects/group%2Fsub%2Fproj/merge_requests/7/notes" },
    });
  });

  it("note on a GitLab issue or merge request of the project named by its id", () => {
    const onIssue = replyCall(
      {
        kind: "comment",
        target: target({ forge: "gitlab", projectId: 42, subject: { kind: "issue", number: 3 } }),
        objectId: "77",
      },
      report(null),
      [],
    );
    expect("call" in onIssue && onIssue.call).toMatchObject({
      method: "PUT",
      path: "/projects/42/issues/3/notes/77",
    });
    expect(headLookup(target({ forge: "gitlab", projectId: 42 })).path).toBe(
      "/projects/42/merge_requests/7",
    );
  });

  it("mark each line comment of a review, which a mention trigger reads as a comment of its own", () => {
    const review = replyCall({ kind: "review", target: target(), objectId: null }, report({}), [
      { path: "a.ts", line: 3, body: "@agent-bridge look here" },
    ]);
    const comments =
      "call" in review ? (review.call.body as { comments: { body: string }[] }).comments : [];
    expect(comments).toHaveLength(1);
    expect(comments[0]?.body).toContain(REPLY_MARKER);
  });

  it("complete a check run with a conclusion from the run's end", () => {
    const made = replyCall(
      { kind: "check", target: target(), objectId: "9" },
      report({ status: "failed" }),
      [],
    );
    expect("call" in made && made.call).toMatchObject({
      method: "PATCH",
      path: "/repos/acme/widgets/check-runs/9",
      body: { status: "completed", conclusion: "failure", head_sha: SHA },
    });
  });
});

describe("reply plans", () => {
  const hook = (reply: ReturnType<typeof replySettings> | null, forge = "github") => ({
    id: "hook-id",
    name: "h",
    forge,
    reply,
  });
  const prComment = {
    action: "created",
    issue: { number: 3, pull_request: {} },
    comment: { body: "@agent-bridge" },
    repository: { full_name: "acme/widgets" },
  };

  it("plan a comment and a commit status on a pull request, and only a comment on an issue", () => {
    const settings = replySettings({ review_comments: true });
    expect(planReplies(hook(settings), "issue_comment", prComment).map((r) => r.kind)).toEqual([
      "comment",
      "status",
      "review",
    ]);
    const onIssue = { ...prComment, issue: { number: 3 } };
    expect(planReplies(hook(settings), "issue_comment", onIssue).map((r) => r.kind)).toEqual([
      "comment",
    ]);
  });

  it("plan nothing for a push, a hook without reply, or a payload of the wrong shape", () => {
    const settings = replySettings({});
    expect(planReplies(hook(settings), "push", { ref: "refs/heads/main", after: SHA })).toEqual([]);
    expect(planReplies(hook(null), "issue_comment", prComment)).toEqual([]);
    expect(planReplies(hook(settings), "issue_comment", "not an object")).toEqual([]);
    expect(
      planReplies(hook(settings), "issue_comment", { ...prComment, repository: null }),
    ).toEqual([]);
  });
});
