import { describe, expect, it } from "vitest";
import {
  changeRef,
  isChangeNumber,
  MAX_CHANGE_NUMBER,
  readChangeCheckout,
} from "../../src/worktrees/change.js";

// The ref a run fetches is built from a checked integer alone: whatever a payload or a row holds,
// it becomes `refs/pull/<digits>/head` or nothing.

describe("a pull (merge) request's ref", () => {
  it("is GitHub's refs/pull/N/head or GitLab's refs/merge-requests/N/head", () => {
    expect(changeRef({ forge: "github", number: 7 })).toBe("refs/pull/7/head");
    expect(changeRef({ forge: "gitlab", number: 7 })).toBe("refs/merge-requests/7/head");
    expect(changeRef({ forge: "github", number: MAX_CHANGE_NUMBER })).toBe(
      `refs/pull/${MAX_CHANGE_NUMBER}/head`,
    );
  });

  it("is never built from a number that is not a whole one from 1 to 2^31-1", () => {
    for (const number of [0, -1, 1.5, MAX_CHANGE_NUMBER + 1, 1e21, Number.NaN, Infinity]) {
      expect(isChangeNumber(number)).toBe(false);
      expect(() => changeRef({ forge: "github", number })).toThrow(RangeError);
    }
  });

  it("reads back only a stored checkout of a known forge, a valid number and a hook's id", () => {
    const hook = "0b8f6c1e-3d2a-4f5b-9c7d-1e2f3a4b5c6d";
    expect(readChangeCheckout({ forge: "gitlab", number: 3, hook })).toEqual({
      forge: "gitlab",
      number: 3,
      hook,
    });
    for (const stored of [
      null,
      "refs/pull/7/head",
      { forge: "github", number: "7", hook },
      { forge: "github", number: "../7", hook },
      { forge: "github", number: 1e300, hook },
      { forge: "bitbucket", number: 7, hook },
      { forge: "github", hook },
      { forge: "github", number: 7 },
      { forge: "github", number: 7, hook: "../../etc" },
      { forge: "github", number: 7, hook: `${hook}\u0000` },
    ]) {
      expect(readChangeCheckout(stored)).toBeUndefined();
    }
  });
});
