import { describe, expect, it } from "vitest";
import { originRefusal, tokenGoesTo, tokenHeader } from "../../src/worktrees/checkout-origin.js";

// What a checkout hook may pin as its origin, and the header its forge token becomes. The header
// is tested here alone: an https origin cannot be reached from the tests, which run offline.

const ROOTS = ["/srv/git"];

describe("a checkout hook's origin", () => {
  it.each([
    "https://github.com/acme/widgets.git",
    "https://gitlab.example.com:8443/group/sub/project.git",
    "/srv/git/widgets.git",
  ])("may be %s", (origin) => {
    expect(originRefusal(origin, ROOTS)).toBeUndefined();
  });

  it.each([
    ["an ssh URL", "ssh://git@github.com/acme/widgets.git"],
    ["an scp-like address", "git@github.com:acme/widgets.git"],
    ["plain http", "http://github.com/acme/widgets.git"],
    ["git://", "git://github.com/acme/widgets.git"],
    ["a transport that runs a command", "ext::sh -c touch% /tmp/x"],
    ["fd::", "fd::3"],
    ["file://", "file:///srv/git/widgets.git"],
    ["credentials in the URL", "https://x-access-token:ghp_x@github.com/acme/widgets.git"],
    ["a query", "https://github.com/acme/widgets.git?x=1"],
    ["a path outside the local roots", "/home/tenant/widgets.git"],
    ["a path climbing out of a root", "/srv/git/../../etc"],
    ["a root itself with a trailing slash", "/srv/git/"],
    ["a relative path", "srv/git/widgets.git"],
    ["an option", "--upload-pack=touch /tmp/x"],
    ["U+0000", "https://github.com/acme/w\u0000.git"],
    ["a newline", "https://github.com/acme/w.git\nx"],
    ["a lone surrogate", "https://github.com/acme/\ud800.git"],
    ["a space", "https://github.com/acme/w .git"],
    ["something past 2000 characters", `https://github.com/${"a".repeat(2000)}`],
  ])("may not be %s", (_what, origin) => {
    expect(originRefusal(origin, ROOTS)).toEqual(expect.any(String));
  });

  it("is never a local path while no local roots are configured", () => {
    expect(originRefusal("/srv/git/widgets.git", [])).toContain(
      "AGENT_BRIDGE_CHECKOUT_LOCAL_ORIGINS",
    );
  });
});

describe("a forge token's header for a fetch", () => {
  const decoded = (header: string) =>
    Buffer.from(header.replace(/^Authorization: Basic /, ""), "base64").toString("utf8");

  it("is Basic x-access-token:TOKEN for GitHub", () => {
    const header = tokenHeader("github", "ghs_abc123");
    expect(header).toMatch(/^Authorization: Basic [A-Za-z0-9+/]+=*$/);
    expect(decoded(header)).toBe("x-access-token:ghs_abc123");
  });

  it("is Basic oauth2:TOKEN for GitLab", () => {
    expect(decoded(tokenHeader("gitlab", "glpat-xyz"))).toBe("oauth2:glpat-xyz");
  });

  it("keeps a token holding CR, LF or U+0000 inside the one header", () => {
    const token = "t\r\nX-Injected: 1\u0000";
    const header = tokenHeader("github", token);
    expect(header).toMatch(/^Authorization: Basic [A-Za-z0-9+/]+=*$/);
    expect(decoded(header)).toBe(`x-access-token:${token}`);
  });
});

describe("where a forge token goes with a fetch", () => {
  it("goes to the forge it is for: its API's host, or the host whose API that is", () => {
    expect(tokenGoesTo("https://github.com/acme/widgets.git", "https://api.github.com")).toBe(true);
    expect(
      tokenGoesTo("https://ghe.example.com/acme/w.git", "https://ghe.example.com/api/v3"),
    ).toBe(true);
    expect(
      tokenGoesTo("https://gitlab.example.com/a/w.git", "https://gitlab.example.com/api/v4"),
    ).toBe(true);
  });

  it("goes nowhere else: another host, a look-alike, a local path", () => {
    expect(tokenGoesTo("https://evil.example/acme/widgets.git", "https://api.github.com")).toBe(
      false,
    );
    expect(tokenGoesTo("https://github.com.evil.example/x.git", "https://api.github.com")).toBe(
      false,
    );
    expect(tokenGoesTo("/var/tmp/origin.git", "https://api.github.com")).toBe(false);
  });
});
