import { describe, expect, it } from "vitest";
import { mentions, readDelivery } from "../../src/forges/delivery.js";

// Reading what a GitHub or GitLab delivery is about, from payloads shaped as the forges send them.

const repository = { full_name: "acme/widgets" };
const pullRequest = {
  number: 7,
  body: "Adds the frobnicator",
  user: { login: "alice", type: "User" },
  author_association: "CONTRIBUTOR",
  head: { sha: "a".repeat(40), ref: "frob", repo: { full_name: "mallory/widgets" } },
  base: { ref: "main", repo: repository },
};

describe("a GitHub delivery", () => {
  it("reads a comment on a pull request as about that pull request, written by its commenter", () => {
    const read = readDelivery("github", "issue_comment", {
      action: "created",
      repository,
      issue: { number: 7, pull_request: { url: "x" } },
      comment: {
        body: "@agent-bridge review",
        user: { login: "bob", type: "User" },
        author_association: "MEMBER",
      },
      sender: { login: "bob", type: "User" },
    });
    expect(read).toMatchObject({
      event: "issue_comment",
      action: "created",
      repository: "acme/widgets",
      subject: { kind: "pull_request", number: 7 },
      change: { headSha: null, fromFork: null },
      actor: { login: "bob", bot: false, association: "MEMBER" },
      text: "@agent-bridge review",
    });
  });

  it("reads a comment on an issue as about the issue", () => {
    const read = readDelivery("github", "issue_comment", {
      action: "created",
      repository,
      issue: { number: 3 },
      comment: { body: "hi", user: { login: "bob" }, author_association: "NONE" },
    });
    expect(read.subject).toEqual({ kind: "issue", number: 3 });
    expect(read.change).toBeNull();
  });

  it("reads an opened pull request from a fork with its head, its author and its text", () => {
    const read = readDelivery("github", "pull_request", {
      action: "opened",
      repository,
      pull_request: pullRequest,
      sender: { login: "alice" },
    });
    expect(read).toMatchObject({
      subject: { kind: "pull_request", number: 7 },
      change: { headSha: "a".repeat(40), headRef: "frob", baseRef: "main", fromFork: true },
      actor: { login: "alice", association: "CONTRIBUTOR" },
      text: "Adds the frobnicator",
    });
  });

  it("reads the label a labeled event added, and a bot as a bot", () => {
    const read = readDelivery("github", "pull_request", {
      action: "labeled",
      repository,
      label: { name: "agent-review" },
      pull_request: pullRequest,
      sender: { login: "renovate[bot]", type: "Bot" },
    });
    expect(read.labelsAdded).toEqual(["agent-review"]);
    expect(read.actor).toMatchObject({ login: "renovate[bot]", bot: true });
  });

  it("reads fields of the wrong type as absent", () => {
    const read = readDelivery("github", "issue_comment", {
      action: 5,
      repository: { full_name: ["x"] },
      issue: { number: "7" },
      comment: { body: { text: "@agent-bridge" }, user: { login: 1 } },
    });
    expect(read).toMatchObject({
      action: null,
      repository: null,
      subject: null,
      actor: null,
      text: null,
    });
  });

  it("reads a payload that is no object as about nothing", () => {
    for (const payload of [null, [], "x", 3]) {
      expect(readDelivery("github", "push", payload)).toMatchObject({
        subject: null,
        actor: null,
        text: null,
        labelsAdded: [],
      });
    }
  });
});

describe("a GitLab delivery", () => {
  const project = { id: 42, path_with_namespace: "acme/widgets" };

  it("reads a note on a merge request from a fork with its head and its author", () => {
    const read = readDelivery("gitlab", "Note Hook", {
      object_kind: "note",
      user: { id: 9, username: "bob" },
      project,
      object_attributes: { note: "@agent-bridge please look", noteable_type: "MergeRequest" },
      merge_request: {
        iid: 5,
        source_branch: "frob",
        target_branch: "main",
        source_project_id: 43,
        target_project_id: 42,
        last_commit: { id: "b".repeat(40) },
      },
    });
    expect(read).toMatchObject({
      event: "note",
      repository: "acme/widgets",
      projectId: 42,
      subject: { kind: "pull_request", number: 5 },
      change: { headSha: "b".repeat(40), headRef: "frob", baseRef: "main", fromFork: true },
      actor: { login: "bob", id: 9, bot: false },
      text: "@agent-bridge please look",
    });
  });

  it("reads the labels a merge request update added", () => {
    const read = readDelivery("gitlab", "Merge Request Hook", {
      object_kind: "merge_request",
      user: { id: 9, username: "bob" },
      project,
      object_attributes: { iid: 5, action: "update", source_project_id: 42, target_project_id: 42 },
      changes: {
        labels: {
          previous: [{ title: "bug" }],
          current: [{ title: "bug" }, { title: "agent-review" }],
        },
      },
    });
    expect(read.labelsAdded).toEqual(["agent-review"]);
    expect(read.change?.fromFork).toBe(false);
  });

  it("reads a project bot as a bot", () => {
    const read = readDelivery("gitlab", "Note Hook", {
      object_kind: "note",
      user: { id: 3, username: "project_42_bot_abc" },
      object_attributes: { note: "x", noteable_type: "Issue" },
      issue: { iid: 2 },
    });
    expect(read.actor?.bot).toBe(true);
    expect(read.subject).toEqual({ kind: "issue", number: 2 });
  });
});

describe("a mention", () => {
  it("is the handle as a word, in any case, with or without its @ in the setting", () => {
    expect(mentions("hey @Agent-Bridge, review this", "@agent-bridge")).toBe(true);
    expect(mentions("@agent-bridge", "agent-bridge")).toBe(true);
    expect(mentions("(@agent-bridge)", "@agent-bridge")).toBe(true);
  });

  it("is not a longer handle, an e-mail address or the name without @", () => {
    expect(mentions("@agent-bridge-bot do it", "@agent-bridge")).toBe(false);
    expect(mentions("mail me at x@agent-bridge", "@agent-bridge")).toBe(false);
    expect(mentions("agent-bridge do it", "@agent-bridge")).toBe(false);
    expect(mentions("anything", "@")).toBe(false);
  });
});
