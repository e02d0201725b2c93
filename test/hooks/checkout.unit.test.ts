import { describe, expect, it } from "vitest";
import {
  changeNames,
  checkoutFor,
  type NO_CHANGE,
  NotAPullRequestError,
} from "../../src/hooks/checkout.js";
import { render } from "../../src/hooks/template.js";

// What a checkout hook takes from a delivery: the request to check out, and the template values.

const HOOK_ID = "0b8f6c1e-3d2a-4f5b-9c7d-1e2f3a4b5c6d";
const github = { id: HOOK_ID, name: "review", checkout: "pull_request", forge: "github" };
const gitlab = { ...github, forge: "gitlab" };

const pr = {
  action: "synchronize",
  pull_request: {
    number: 12,
    head: { sha: "a".repeat(40), ref: "feature/x", repo: { full_name: "o/r" } },
    base: { ref: "main", repo: { full_name: "o/r" } },
  },
};
const mr = {
  object_kind: "merge_request",
  object_attributes: {
    iid: 5,
    action: "update",
    source_branch: "topic",
    target_branch: "develop",
    last_commit: { id: "b".repeat(40) },
  },
};

describe("a checkout hook's delivery", () => {
  it("checks out the pull request a GitHub delivery, or an issue comment on one, is about", () => {
    expect(checkoutFor(github, "pull_request", pr)).toEqual({
      forge: "github",
      number: 12,
      hook: HOOK_ID,
    });
    const comment = { action: "created", issue: { number: 9, pull_request: {} }, comment: {} };
    expect(checkoutFor(github, "issue_comment", comment)).toEqual({
      forge: "github",
      number: 9,
      hook: HOOK_ID,
    });
  });

  it("checks out the merge request of a GitLab delivery, by its iid", () => {
    expect(checkoutFor(gitlab, "Merge Request Hook", mr)).toEqual({
      forge: "gitlab",
      number: 5,
      hook: HOOK_ID,
    });
  });

  it("refuses a delivery about an issue, a push or nothing", () => {
    const issue = { action: "opened", issue: { number: 3 } };
    for (const [event, payload] of [
      ["issues", issue],
      ["push", { ref: "refs/heads/main" }],
      ["pull_request", { pull_request: { number: "../1" } }],
      ["pull_request", null],
    ] as const) {
      expect(() => checkoutFor(github, event, payload)).toThrow(NotAPullRequestError);
    }
  });

  it("checks nothing out for a hook without checkout", () => {
    expect(checkoutFor({ ...github, checkout: null }, "push", {})).toBeNull();
  });

  it("refuses every delivery to a hook without a forge", () => {
    expect(() => checkoutFor({ ...github, forge: null }, "pull_request", pr)).toThrow(
      NotAPullRequestError,
    );
  });
});

describe("the pull request's template names", () => {
  const template =
    "#{{pull_request.number}} {{pull_request.head_ref}}@{{pull_request.head_sha}} -> {{pull_request.base_ref}}";
  const context = (names: typeof NO_CHANGE) => ({
    payload: {},
    event: "e",
    delivery_id: "d",
    hook: "h",
    fire_time: "",
    ...names,
  });

  it("fill from a GitHub pull request and a GitLab merge request", () => {
    expect(render(template, context(changeNames(github, "pull_request", pr)))).toBe(
      `#12 feature/x@${"a".repeat(40)} -> main`,
    );
    expect(render(template, context(changeNames(gitlab, "Merge Request Hook", mr)))).toBe(
      `#5 topic@${"b".repeat(40)} -> develop`,
    );
  });

  it("are empty where the delivery says nothing: a comment names the number alone", () => {
    const comment = { issue: { number: 9, pull_request: {} }, comment: { body: "hi" } };
    expect(render(template, context(changeNames(github, "issue_comment", comment)))).toBe(
      "#9 @ -> ",
    );
    expect(render(template, context(changeNames(github, "push", { ref: "x" })))).toBe("# @ -> ");
  });

  it("insert a hostile ref name as text, never as a template", () => {
    const hostile = {
      pull_request: { number: 1, head: { ref: "{{pull_request.base_ref}}\u0000" } },
    };
    expect(
      render("{{pull_request.head_ref}}", context(changeNames(github, "pull_request", hostile))),
    ).toBe("{{pull_request.base_ref}}\u0000");
  });
});
