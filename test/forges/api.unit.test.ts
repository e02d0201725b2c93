import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callForge, type ForgeAccess, retryTime } from "../../src/forges/api.js";
import { CallbackTargets } from "../../src/net/targets.js";
import { type MockForge, startMockForge } from "../support/mock-forge.js";

// A call to a forge's API says whether a retry could change its answer, and when the forge asked
// to be called again.

const loopback = new CallbackTargets([{ address: "127.0.0.1", prefix: 32, family: "ipv4" }]);
const opts = (clock = Date.now) => ({
  targets: loopback,
  timeoutMs: 5000,
  stopping: new AbortController().signal,
  clock,
});

let github: MockForge;
let gitlab: MockForge;
beforeAll(async () => {
  github = await startMockForge({ forge: "github", token: "ghp_token" });
  gitlab = await startMockForge({ forge: "gitlab", token: "glpat-token" });
});
afterAll(async () => {
  await github.close();
  await gitlab.close();
});

const access = (forge: "github" | "gitlab", token: string): ForgeAccess => ({
  forge,
  apiUrl: forge === "github" ? github.url : `${gitlab.url}/api/v4/`,
  token,
});

describe("a call to a forge", () => {
  it("sends GitHub's token as a bearer with its API version, and returns the created resource", async () => {
    const answer = await callForge(
      access("github", "ghp_token"),
      { method: "POST", path: "/repos/acme/widgets/issues/7/comments", body: { body: "hi" } },
      opts(),
    );
    expect(answer).toMatchObject({ ok: true, status: 201, json: { body: "hi" } });
    const sent = github.requests.at(-1);
    expect(sent?.headers["x-github-api-version"]).toBe("2022-11-28");
    expect(sent?.headers.authorization).toBe("Bearer ghp_token");
  });

  it("sends GitLab's token as PRIVATE-TOKEN below the API's path", async () => {
    const answer = await callForge(
      access("gitlab", "glpat-token"),
      { method: "POST", path: "/projects/42/merge_requests/5/notes", body: { body: "hi" } },
      opts(),
    );
    expect(answer.ok).toBe(true);
    expect(gitlab.requests.at(-1)?.path).toBe("/api/v4/projects/42/merge_requests/5/notes");
  });

  it("takes a wrong token's 401 and a missing repository's 404 as final", async () => {
    const wrong = await callForge(
      access("github", "ghp_wrong"),
      { method: "GET", path: "/repos/acme/widgets/pulls/7" },
      opts(),
    );
    expect(wrong).toMatchObject({ ok: false, status: 401, error: "http_401", final: true });
    const missing = await callForge(
      access("github", "ghp_token"),
      { method: "GET", path: "/repos/acme/gone/pulls/7" },
      opts(),
    );
    expect(missing).toMatchObject({ ok: false, status: 404, final: true });
  });

  it("takes a 502 as worth another attempt", async () => {
    github.failNext({ path: /\/pulls\/7$/, status: 502 });
    const answer = await callForge(
      access("github", "ghp_token"),
      { method: "GET", path: "/repos/acme/widgets/pulls/7" },
      opts(),
    );
    expect(answer).toMatchObject({ ok: false, status: 502, final: false, retryAt: null });
  });

  it("takes GitHub's secondary rate limit (403 with Retry-After) as a wait from its answer, not a refusal", async () => {
    const now = Date.now();
    const refusals = () => github.requests.filter((r) => r.status === 403).length;
    const before = refusals();
    const answered = () => refusals() > before;
    // Read once the forge has answered: a call that took long still waits the whole Retry-After.
    let readAfterAnswer: boolean | undefined;
    const clock = () => {
      readAfterAnswer = answered();
      return now;
    };
    github.failNext({
      path: /comments$/,
      status: 403,
      headers: { "retry-after": "60" },
      body: { message: "You have exceeded a secondary rate limit" },
    });
    const answer = await callForge(
      access("github", "ghp_token"),
      { method: "POST", path: "/repos/acme/widgets/issues/7/comments", body: { body: "x" } },
      opts(clock),
    );
    expect(answer).toMatchObject({ ok: false, error: "rate_limited", final: false });
    expect(!answer.ok && answer.retryAt).toBe(now + 60_000);
    expect(readAfterAnswer).toBe(true);
  });

  it("takes a plain 403 as final", async () => {
    github.failNext({
      path: /comments$/,
      status: 403,
      body: { message: "Resource not accessible" },
    });
    const answer = await callForge(
      access("github", "ghp_token"),
      { method: "POST", path: "/repos/acme/widgets/issues/7/comments", body: { body: "x" } },
      opts(),
    );
    expect(answer).toMatchObject({ ok: false, status: 403, error: "http_403", final: true });
  });

  it("refuses an address the targets do not allow, naming no port", async () => {
    const answer = await callForge(
      access("github", "ghp_token"),
      { method: "GET", path: "/repos/acme/widgets/pulls/7" },
      { ...opts(), targets: new CallbackTargets([]) },
    );
    expect(answer).toMatchObject({ ok: false, status: null, final: false });
    expect(!answer.ok && answer.error).toMatch(/^blocked_address \(loopback\)$/);
  });
});

describe("the time a forge asks to be called again", () => {
  const now = 1_700_000_000_000;
  it("is Retry-After in seconds or as a date", () => {
    expect(retryTime({ "retry-after": "30" }, now)).toBe(now + 30_000);
    expect(retryTime({ "retry-after": new Date(now + 5000).toUTCString() }, now)).toBe(now + 5000);
  });
  it("is the rate limit's reset once no request is left, on GitHub and on GitLab", () => {
    const reset = String(now / 1000 + 120);
    expect(retryTime({ "x-ratelimit-remaining": "0", "x-ratelimit-reset": reset }, now)).toBe(
      now + 120_000,
    );
    expect(retryTime({ "ratelimit-remaining": "0", "ratelimit-reset": reset }, now)).toBe(
      now + 120_000,
    );
    expect(
      retryTime({ "x-ratelimit-remaining": "12", "x-ratelimit-reset": reset }, now),
    ).toBeNull();
  });
  it("is none for garbage", () => {
    expect(retryTime({ "retry-after": "soon" }, now)).toBeNull();
    expect(retryTime({}, now)).toBeNull();
  });
});
