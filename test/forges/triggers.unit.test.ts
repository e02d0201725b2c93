import { describe, expect, it } from "vitest";
import { readDelivery } from "../../src/forges/delivery.js";
import { restrictionOf } from "../../src/forges/fork.js";
import { matchTrigger } from "../../src/forges/triggers.js";
import { mayTrigger, trustOf } from "../../src/forges/trust.js";
import type { Triggers } from "../../src/hook-triggers.js";

// Which trigger a forge's delivery matches, read from its payload alone; and a fork's restriction
// by default.

const gitlab = (payload: object) => readDelivery("gitlab", "", payload);
const match = (triggers: Triggers, payload: object) =>
  matchTrigger(triggers, gitlab(payload), payload);

const mergeRequest = (action: string, more: object = {}, attributes: object = {}) => ({
  object_kind: "merge_request",
  object_attributes: { iid: 3, action, source_project_id: 1, target_project_id: 1, ...attributes },
  ...more,
});

describe("a merge request's action in GitHub's words", () => {
  const all: Triggers = {
    pull_request: ["opened", "synchronize", "reopened", "ready_for_review", "closed"],
  };
  it("maps open, reopen, close and merge", () => {
    for (const action of ["open", "reopen", "close", "merge"]) {
      expect(match(all, mergeRequest(action)), action).toMatchObject({ trigger: "pull_request" });
    }
    expect(match({ pull_request: ["opened"] }, mergeRequest("close"))).toEqual({
      detail: "no trigger matches (pull_request: closed is not in opened)",
    });
  });

  it("reads an update as synchronize only with new commits, as ready_for_review only when the draft comes off", () => {
    const pushed = mergeRequest("update", {}, { oldrev: "abc" });
    expect(match({ pull_request: ["synchronize"] }, pushed)).toMatchObject({
      trigger: "pull_request",
      byPerson: false,
    });
    const undrafted = mergeRequest("update", {
      changes: { draft: { previous: true, current: false } },
    });
    expect(match({ pull_request: ["ready_for_review"] }, undrafted)).toMatchObject({
      trigger: "pull_request",
    });
    const retitled = mergeRequest("update", {
      changes: { title: { previous: "a", current: "b" } },
    });
    expect(match(all, retitled)).toEqual({
      detail:
        "no trigger matches (pull_request: merge_request.update is not one of the pull request's actions)",
    });
  });
});

describe("manual", () => {
  it("matches a delivery without a forge payload, and not a forge's event", () => {
    expect(matchTrigger({ manual: true }, null, {})).toEqual({
      trigger: "manual",
      byPerson: false,
    });
    expect(match({ manual: true }, mergeRequest("open"))).toEqual({
      detail: "no trigger matches (manual: merge_request.open is not a dispatch)",
    });
  });

  it("is the only trigger a delivery without a forge payload can match", () => {
    expect(matchTrigger({ mention: "@a", labels: ["x"] }, null, {})).toEqual({
      detail:
        "no trigger matches (mention: a delivery without a forge payload mentions nobody; labels: a delivery without a forge payload adds no label)",
    });
  });
});

describe("a mention", () => {
  const note = (text: unknown, noteable = "Issue") => ({
    object_kind: "note",
    object_attributes: { note: text, noteable_type: noteable },
    issue: { iid: 2 },
  });
  it("on an issue's note matches, as a person's word; on a commit's note it does not", () => {
    expect(match({ mention: "@agent-bridge" }, note("hey @Agent-Bridge, look"))).toEqual({
      trigger: "mention",
      byPerson: true,
    });
    expect(match({ mention: "@agent-bridge" }, note("@agent-bridge", "Commit"))).toEqual({
      detail: "no trigger matches (mention: it is not about an issue or a pull request)",
    });
  });
});

describe("a fork's restriction", () => {
  it("keeps the hook's mode unless it bypasses, and gives no egress", () => {
    expect(restrictionOf(null, "acceptEdits")).toEqual({
      permissionMode: "acceptEdits",
      egress: [],
    });
    expect(restrictionOf(null, "bypassPermissions").permissionMode).toBe("default");
    expect(restrictionOf(null, "dangerously-skip-permissions").permissionMode).toBe("default");
    expect(restrictionOf({ permission_mode: "plan", egress: ["github.com"] }, "auto")).toEqual({
      permissionMode: "plan",
      egress: ["github.com"],
    });
  });
});

describe("a listed bot", () => {
  const comment = (login: string, type: string) =>
    readDelivery("github", "issue_comment", {
      action: "created",
      repository: { full_name: "acme/widgets" },
      issue: { number: 1 },
      comment: { body: "@agent-bridge go", user: { login, type }, author_association: "NONE" },
    });
  const trusted = trustOf({ bots: ["renovate"] });

  it("trusts that bot account, with or without its [bot] suffix written", async () => {
    expect(await mayTrigger(trusted, comment("renovate[bot]", "Bot"), "mention", null)).toEqual({
      trusted: true,
    });
  });

  it("trusts no person who took the bot's name", async () => {
    expect(await mayTrigger(trusted, comment("renovate", "User"), "mention", null)).toMatchObject({
      trusted: false,
    });
  });
});
