import { createHmac, randomBytes, randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ClaudeEnv, makeClaudeEnv } from "../support/claude-env.js";
import {
  type MockAnthropic,
  startMockAnthropic,
  structuredOutputTurn,
} from "../support/mock-anthropic.js";
import { type ForgeRequest, type MockForge, startMockForge } from "../support/mock-forge.js";
import { seedDataDir } from "../support/pglite-template.js";
import { runCommand } from "../support/process.js";
import { codeBlocks, docSection } from "../support/readme.js";
import { type ServerProcess, startServer } from "../support/server.js";

// docs/ci.md as a user follows it: the server as it starts (API keys on, the key it printed), the
// hooks made with the page's own curl and JSON, the real Claude Code CLI against a mock Messages
// API, and GitHub and GitLab played by a mock of their REST APIs and by signed deliveries shaped as
// theirs. The one change to the page's JSON is where the forge is (`forge.api_url`: the mock), and
// the secrets and tokens are the test's.

const SECRET = `whs-${randomBytes(12).toString("hex")}`;
const GITHUB_TOKEN = `github_pat_${randomBytes(12).toString("hex")}`;
const GITLAB_TOKEN = `glpat-${randomBytes(12).toString("hex")}`;
const HEAD = "0123456789abcdef0123456789abcdef01234567";
const REVIEW = {
  summary: "The parser loops for ever on an empty line.",
  verdict: "request_changes",
  review_comments: [{ path: "parser.ts", line: 2, body: "This loop never ends on an empty line." }],
};

describe("docs/ci.md: reviews on pull requests", () => {
  let mock: MockAnthropic;
  let ce: ClaudeEnv;
  let github: MockForge;
  let gitlab: MockForge;
  let server: ServerProcess;
  let dir: string;
  let key: string;

  beforeAll(async () => {
    mock = await startMockAnthropic({ quiet: true });
    ce = await makeClaudeEnv(mock.url);
    await writeFile(
      join(ce.cwd, "parser.ts"),
      "export function parse(text: string) {\n  while (text === '') {}\n}\n",
    );
    github = await startMockForge({ forge: "github", token: GITHUB_TOKEN });
    gitlab = await startMockForge({ forge: "gitlab", token: GITLAB_TOKEN });
    dir = await mkdtemp(join(tmpdir(), "ci-doc-"));
    const dataDir = join(dir, "data");
    await seedDataDir(dataDir);
    server = await startServer({
      ...ce.env,
      AGENT_BRIDGE_DATA_DIR: dataDir,
      AGENT_BRIDGE_AUTH: undefined,
      AGENT_BRIDGE_WORK_DIR: ce.cwd,
      // Quick retries and progress, so that the test sees them all.
      AGENT_BRIDGE_REPLY_PROGRESS_MS: "100",
      AGENT_BRIDGE_CALLBACK_POLL_MS: "50",
      AGENT_BRIDGE_CALLBACK_BACKOFF_MIN_MS: "50",
      AGENT_BRIDGE_CALLBACK_BACKOFF_MAX_MS: "200",
    });
    [, key = ""] = await server.waitForOutput(/\n {2}(ab_[A-Za-z0-9_-]{43})\n/);
  });
  afterAll(async () => {
    await server?.stop();
    await mock?.close();
    await ce?.cleanup();
    await github?.close();
    await gitlab?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** The hook JSON of a section of the page, with the test's secrets and the mock as the forge. */
  function hookJson(section: string, forge: MockForge, token: string) {
    const [json] = codeBlocks(section, "json");
    return {
      ...JSON.parse(json ?? ""),
      secret: SECRET,
      forge_token: token,
      forge: { api_url: forge.url },
    };
  }

  /** Runs the page's curl line in `dir` (for `file`, GitLab's hook), with `B` and `H` as the page says. */
  async function curl(file = "pr-review.json"): Promise<Record<string, unknown>> {
    const [line] = codeBlocks(await docSection("docs/ci.md", "On GitHub"), "sh");
    const res = await runCommand("sh", ["-e", "-c", (line ?? "").replace("pr-review.json", file)], {
      cwd: dir,
      env: { PATH: process.env.PATH, B: server.url, H: `Authorization: Bearer ${key}` },
    });
    expect(res.stderr).toBe("");
    return JSON.parse(res.stdout);
  }

  const api = async (path: string) =>
    (await fetch(`${server.url}${path}`, { headers: { Authorization: `Bearer ${key}` } })).json();

  /** A delivery as GitHub sends it: signed with the webhook's secret. */
  function fromGithub(event: string, payload: object) {
    const body = JSON.stringify(payload);
    return fetch(`${server.url}/v1/hooks/pr-review/deliveries`, {
      method: "POST",
      headers: {
        "Content-Type": "application/json",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": randomUUID(),
        "X-Hub-Signature-256": `sha256=${createHmac("sha256", SECRET).update(body).digest("hex")}`,
      },
      body,
    });
  }

  const comment = (login: string, association: string, text: string) => ({
    action: "created",
    repository: { full_name: "acme/widgets" },
    issue: {
      number: 7,
      pull_request: { url: "https://api.github.com/repos/acme/widgets/pulls/7" },
    },
    comment: { body: text, user: { login, type: "User" }, author_association: association },
    sender: { login, type: "User" },
  });

  /** The run's replies once each has settled. */
  async function settledReplies(runId: string) {
    for (;;) {
      const run = await api(`/v1/runs/${runId}`);
      const done = !["queued", "running"].includes(run.status);
      if (done && run.replies.every((r: { state: string }) => r.state !== "pending")) return run;
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** The `body` field of a request's JSON: a comment's or a note's text. */
  const textOf = (request: ForgeRequest | undefined) =>
    String((request?.body as { body?: unknown } | undefined)?.body);

  const to = (forge: MockForge, method: string, path: RegExp) =>
    forge.requests.filter((r: ForgeRequest) => r.method === method && path.test(r.path));

  it("makes the hook with the page's curl and JSON", async () => {
    await writeFile(
      join(dir, "pr-review.json"),
      JSON.stringify(hookJson(await docSection("docs/ci.md", "On GitHub"), github, GITHUB_TOKEN)),
    );
    const hook = await curl();
    expect(hook).toMatchObject({
      name: "pr-review",
      triggers: { mention: "@agent-bridge" },
      reply: { comment: true, status: "status", review_comments: true },
      forge: { kind: "github", token_set: true },
    });
    expect(JSON.stringify(hook)).not.toContain(GITHUB_TOKEN);
  });

  it("takes GitHub's ping and a comment by someone the hook does not trust, and starts nothing", async () => {
    const ping = await fromGithub("ping", { zen: "Keep it logically awesome.", hook_id: 1 });
    expect(ping.status).toBe(200);
    expect(await ping.json()).toMatchObject({ outcome: "ignored", run_id: null });
    const stranger = await fromGithub(
      "issue_comment",
      comment("mallory", "NONE", "@agent-bridge review this"),
    );
    expect(stranger.status).toBe(200);
    expect(await stranger.json()).toMatchObject({ outcome: "ignored", run_id: null });
    const { data } = await api("/v1/hooks/pr-review/deliveries");
    expect(data[0].detail).toMatch(/NONE/);
    expect(to(github, "POST", /\/comments$/)).toHaveLength(0);
  });

  it("answers a member's mention with a comment kept up to date, a commit status and a review, through a 502", async () => {
    github.set("/repos/acme/widgets/pulls/7", {
      number: 7,
      head: { sha: HEAD, repo: { full_name: "acme/widgets" } },
      base: { ref: "main", repo: { full_name: "acme/widgets" } },
    });
    // GitHub falls over once as the comment is first posted: the bridge tries again.
    github.failNext({ method: "POST", path: /\/issues\/7\/comments$/, status: 502 });
    mock.script(
      {
        blocks: [
          { type: "tool_use", name: "Read", input: { file_path: join(ce.cwd, "parser.ts") } },
        ],
      },
      structuredOutputTurn(REVIEW),
    );
    const res = await fromGithub(
      "issue_comment",
      comment("alice", "MEMBER", "@agent-bridge review this"),
    );
    expect(res.status).toBe(202);
    const { run_id } = await res.json();
    const run = await settledReplies(run_id);
    expect(run).toMatchObject({ status: "succeeded" });
    expect(run.replies).toEqual([
      expect.objectContaining({ kind: "comment", state: "posted" }),
      expect.objectContaining({ kind: "status", state: "posted" }),
      expect.objectContaining({ kind: "review", state: "posted" }),
    ]);

    // The prompt the page's template made, as the model got it.
    expect(JSON.stringify(mock.requests.at(-1)?.body)).toContain(
      "Review pull request #7 of acme/widgets, as alice asks: @agent-bridge review this",
    );
    const posted = to(github, "POST", /\/issues\/7\/comments$/);
    expect(posted.map((r) => r.status)).toEqual([502, 201]);
    expect(textOf(posted[1])).toContain("agent-bridge** is on it");
    const edits = to(github, "PATCH", /\/issues\/comments\/\d+$/);
    const final = textOf(edits.at(-1));
    expect(final).toContain(REVIEW.summary);
    expect(final).toContain("Structured output");
    expect([posted[1], ...edits].some((r) => textOf(r).includes("`Read`"))).toBe(true);
    const statuses = to(github, "POST", new RegExp(`/statuses/${HEAD}$`)).map(
      (r) => r.body as { state: string; context: string },
    );
    expect(statuses.map((s) => s.state)).toEqual(["pending", "success"]);
    expect(statuses[0]?.context).toBe("agent-bridge/pr-review");
    const [review] = to(github, "POST", /\/pulls\/7\/reviews$/);
    expect(review?.body).toMatchObject({
      comments: [
        expect.objectContaining({
          path: "parser.ts",
          line: 2,
          body: expect.stringContaining(REVIEW.review_comments[0]?.body ?? "?"),
        }),
      ],
    });
  });

  it("answers a GitLab note on a merge request with a note and a commit status", async () => {
    await writeFile(
      join(dir, "mr-review.json"),
      JSON.stringify(hookJson(await docSection("docs/ci.md", "On GitLab"), gitlab, GITLAB_TOKEN)),
    );
    expect(await curl("mr-review.json")).toMatchObject({
      name: "mr-review",
      forge: { kind: "gitlab" },
    });
    // The author is a Developer of the project: the bridge asks GitLab, with the hook's token.
    gitlab.set("/projects/42/members/all/9", { id: 9, username: "dana", access_level: 30 });
    mock.script({ blocks: [{ type: "text", text: "Merge request !5 looks right." }] });
    const body = JSON.stringify({
      object_kind: "note",
      user: { id: 9, username: "dana" },
      project: { id: 42, path_with_namespace: "acme/widgets" },
      object_attributes: { note: "@agent-bridge please check", noteable_type: "MergeRequest" },
      merge_request: {
        iid: 5,
        source_branch: "fix",
        target_branch: "main",
        source_project_id: 42,
        target_project_id: 42,
        last_commit: { id: HEAD },
      },
    });
    const res = await fetch(`${server.url}/v1/hooks/mr-review/deliveries`, {
      method: "POST",
      headers: {
        "Content-Type": "application/json",
        "X-Gitlab-Event": "Note Hook",
        "X-Gitlab-Token": SECRET,
        "Idempotency-Key": randomUUID(),
      },
      body,
    });
    expect(res.status).toBe(202);
    const run = await settledReplies((await res.json()).run_id);
    expect(run.replies.map((r: { kind: string; state: string }) => `${r.kind}:${r.state}`)).toEqual(
      ["comment:posted", "status:posted"],
    );
    const notes = to(gitlab, "PUT", /\/projects\/42\/merge_requests\/5\/notes\/\d+$/);
    expect(textOf(notes.at(-1))).toContain("Merge request !5 looks right.");
    const states = to(gitlab, "POST", new RegExp(`/projects/42/statuses/${HEAD}$`)).map(
      (r) => (r.body as { state: string }).state,
    );
    expect(states).toEqual(["running", "success"]);
  });
});
