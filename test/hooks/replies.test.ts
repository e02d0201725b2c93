import { randomBytes } from "node:crypto";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { eq, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildHookWorkers } from "../../src/app.js";
import { REPLY_MARKER } from "../../src/forges/marker.js";
import { ReplyOutbox } from "../../src/hooks/reply-outbox.js";
import { runEventBatches } from "../../src/store/schema.js";
import { cli } from "../cli/run-cli.js";
import { createTestApp, createTestAppOn, listen, type TestApp } from "../support/app.js";
import { BACKENDS } from "../support/db.js";
import { type FakeCli, fakeCli } from "../support/fake-cli.js";
import { streamedReply } from "../support/fake-scenarios.js";
import { type MockForge, startMockForge } from "../support/mock-forge.js";
import { codeBlocks, docSection } from "../support/readme.js";
import {
  createHook,
  deliver,
  getRun,
  githubHeaders,
  isFinished,
  type RunJson,
  until,
} from "./support.js";

// Replies where a delivery came from: a hook's run comments on the GitHub pull request (or GitLab
// merge request) that started it, keeps the comment up to date while it works and puts its result
// there at the end, with a check run or commit status on the change's head, all through the
// durable reply outbox against a loopback mock of each forge's API.

const SECRET = "forge-secret-0123456789";
const GITHUB_TOKEN = `ghp_${randomBytes(12).toString("hex")}`;
const GITLAB_TOKEN = `glpat-${randomBytes(12).toString("hex")}`;
const HEAD = "0123456789abcdef0123456789abcdef01234567";
const ENV = {
  AGENT_BRIDGE_REPLY_PROGRESS_MS: "100",
  AGENT_BRIDGE_CALLBACK_POLL_MS: "50",
  AGENT_BRIDGE_CALLBACK_BACKOFF_MIN_MS: "10",
  AGENT_BRIDGE_CALLBACK_BACKOFF_MAX_MS: "20",
  AGENT_BRIDGE_CALLBACK_TIMEOUT_MS: "5000",
  AGENT_BRIDGE_CALLBACK_MAX_ATTEMPTS: "4",
};

type ReplyJson = RunJson["replies"][number];

describe.each(BACKENDS)("replies on the forge on %s", (backend) => {
  let fake: FakeCli;
  let t: TestApp;
  let replies: ReplyOutbox;
  let server: { url: string; close(): Promise<void> };
  let github: MockForge;
  let gitlab: MockForge;

  beforeAll(async () => {
    fake = await fakeCli(streamedReply(["Looks ", "fine."]));
    t = await createTestApp(backend, { ...fake.bridgeEnv, ...ENV });
    ({ replies } = buildHookWorkers(t.deps));
    replies.start();
    server = await listen(t.app);
    github = await startMockForge({ forge: "github", token: GITHUB_TOKEN });
    gitlab = await startMockForge({ forge: "gitlab", token: GITLAB_TOKEN });
    // The hook docs/webhooks.md shows, on the mock's API, with a check run (a GitHub App's token
    // may make one) in place of its commit status: the status's flow is GitLab's below.
    const [documented] = codeBlocks(await docSection("docs/webhooks.md", "Replies"), "json");
    const hook = JSON.parse(documented ?? "");
    expect(hook.reply).toEqual({ comment: true, status: "status", review_comments: false });
    await createHook(server.url, {
      ...hook,
      reply: { ...hook.reply, status: "check" },
      name: "gh",
      secret: SECRET,
      forge: { api_url: github.url },
      forge_token: GITHUB_TOKEN,
    });
    await createHook(server.url, {
      name: "gl",
      verification: "gitlab",
      secret: SECRET,
      prompt_template: "Answer {{payload.object_attributes.note}}",
      forge: { api_url: gitlab.url },
      forge_token: GITLAB_TOKEN,
      reply: {},
    });
  });
  afterAll(async () => {
    await server.close();
    await replies.stop();
    await t.close();
    await fake.cleanup();
    await github.close();
    await gitlab.close();
  });

  /** A signed issue_comment on pull request `number` (its payload names no head commit). */
  async function commentOnPr(number: number): Promise<string> {
    const body = JSON.stringify({
      action: "created",
      issue: { number, pull_request: { url: `https://example.test/pulls/${number}` } },
      comment: {
        body: "@agent-bridge have a look",
        user: { login: "alice" },
        author_association: "MEMBER",
      },
      repository: { full_name: "acme/widgets" },
      sender: { login: "alice" },
    });
    github.set(`/repos/acme/widgets/pulls/${number}`, { number, head: { sha: HEAD } });
    const res = await deliver(
      server.url,
      "gh",
      body,
      githubHeaders(SECRET, body, { event: "issue_comment" }),
    );
    expect(res.status).toBe(202);
    return (await res.json()).run_id;
  }

  const repliesOf = async (runId: string): Promise<ReplyJson[]> =>
    (await (await fetch(`${server.url}/v1/runs/${runId}`)).json()).replies;

  /** The run's replies once it has ended and every one of them has settled (none pending). */
  const settled = (runId: string) =>
    until(
      async () => {
        const run = await getRun(server.url, runId);
        const list = run.replies;
        return (
          isFinished(run) && list.length > 0 && list.every((r) => r.state !== "pending") && list
        );
      },
      30_000,
      "the replies to settle",
    );

  const bodyText = (body: unknown) => String((body as { body?: unknown } | undefined)?.body);
  const commentsOf = (number: number) => `/repos/acme/widgets/issues/${number}/comments`;

  it("comments on the pull request at the start, shows the tools used, ends with the result and completes a check", async () => {
    const go = join(fake.dir, `go-${randomBytes(4).toString("hex")}`);
    await fake.setScenario({
      steps: [
        { init: true },
        { shell: { command: "ls", output: "README.md" } },
        { waitFile: go },
        { reply: { parts: ["Reviewed: ", "all good."] } },
        { succeed: { costUsd: 0.0123 } },
      ],
    });
    const runId = await commentOnPr(101);
    const created = await github.waitFor((r) => r.method === "POST" && r.path === commentsOf(101));
    expect(bodyText(created.body)).toContain(REPLY_MARKER);
    expect(bodyText(created.body)).toContain(runId);
    // The tool shows in an update, or already in the comment made at the start when the run's
    // start and its tool came in one batch of events (a loaded machine).
    const progress = await github.waitFor(
      (r) =>
        (r === created || r.path.startsWith("/repos/acme/widgets/issues/comments/")) &&
        bodyText(r.body).includes("Bash"),
    );
    expect(bodyText(progress.body)).toContain(REPLY_MARKER);
    const check = await github.waitFor(
      (r) => r.method === "POST" && r.path === "/repos/acme/widgets/check-runs",
    );
    expect(check.body).toMatchObject({
      name: "agent-bridge/gh",
      head_sha: HEAD,
      status: "in_progress",
      external_id: runId,
    });
    // The issue_comment named no head: the pull request was asked for it, before the check.
    expect(
      github.requests.findIndex((r) => r.method === "GET" && r.path.endsWith("/pulls/101")),
    ).toBeLessThan(github.requests.indexOf(check));

    await writeFile(go, "");
    const final = await github.waitFor(
      (r) =>
        r.method === "PATCH" &&
        r.path.startsWith("/repos/acme/widgets/issues/comments/") &&
        bodyText(r.body).includes("Reviewed: all good."),
    );
    expect(bodyText(final.body)).toContain(REPLY_MARKER);
    expect(bodyText(final.body)).toContain(`agent-bridge run ${runId}`);
    expect(bodyText(final.body)).toContain("$0.0123");
    const completed = await github.waitFor(
      (r) => r.method === "PATCH" && r.path.startsWith("/repos/acme/widgets/check-runs/"),
    );
    expect(completed.body).toMatchObject({ status: "completed", conclusion: "success" });
    expect((completed.body as { output: { summary: string } }).output.summary).toContain(
      "Reviewed: all good.",
    );
    expect(await settled(runId)).toEqual([
      expect.objectContaining({
        kind: "comment",
        state: "posted",
        url: expect.stringMatching(
          /^http:\/\/127\.0\.0\.1:\d+\/web\/repos\/acme\/widgets\/issues\/101\/comments\/\d+$/,
        ),
        last_status: 200,
        last_error: null,
      }),
      expect.objectContaining({ kind: "check", state: "posted", last_status: 200 }),
    ]);
    // One comment and one check run, updated in place: never a second one.
    const posts = github.requests.filter(
      (r) => r.method === "POST" && (r.path === commentsOf(101) || r.path.endsWith("/check-runs")),
    );
    expect(posts).toHaveLength(2);
    // The CLI's list of runs shows them.
    const listed = await cli("--url", server.url, "runs", "ls");
    const line = listed.stdout.split("\n").find((l) => l.startsWith(runId));
    expect(line).toMatch(/\scomment:posted,check:posted$/);
    // Nothing the bridge posted carries the hook's token.
    expect(JSON.stringify(github.requests.map((r) => r.body))).not.toContain(GITHUB_TOKEN);
  });

  it("puts a note on a GitLab merge request and a commit status on its head", async () => {
    const go = join(fake.dir, `go-${randomBytes(4).toString("hex")}`);
    await fake.setScenario({
      steps: [
        { init: true },
        { waitFile: go },
        { reply: { parts: ["Merge ", "away."] } },
        { succeed: {} },
      ],
    });
    const sha = "89abcdef0123456789abcdef0123456789abcdef";
    const body = JSON.stringify({
      object_kind: "note",
      project: { id: 42, path_with_namespace: "acme/widgets" },
      object_attributes: { note: "@agent-bridge look", noteable_type: "MergeRequest" },
      merge_request: {
        iid: 5,
        last_commit: { id: sha },
        source_project_id: 42,
        target_project_id: 42,
      },
      user: { username: "alice", id: 1 },
    });
    const res = await deliver(server.url, "gl", body, {
      "Content-Type": "application/json",
      "X-Gitlab-Token": SECRET,
      "Idempotency-Key": crypto.randomUUID(),
    });
    const runId = (await res.json()).run_id;
    const notes = "/projects/42/merge_requests/5/notes";
    // The note and the status made at the start, before the run goes on.
    await gitlab.waitFor((r) => r.method === "POST" && r.path === notes);
    await gitlab.waitFor((r) => (r.body as { state?: unknown } | undefined)?.state === "running");
    await writeFile(go, "");
    const final = await gitlab.waitFor(
      (r) => r.path.startsWith(notes) && bodyText(r.body).includes("Merge away."),
    );
    expect(bodyText(final.body)).toContain(REPLY_MARKER);
    expect(await settled(runId)).toEqual([
      expect.objectContaining({ kind: "comment", state: "posted" }),
      expect.objectContaining({ kind: "status", state: "posted" }),
    ]);
    const statuses = gitlab.requests.filter((r) => r.path === `/projects/42/statuses/${sha}`);
    expect(statuses.map((r) => r.body)).toEqual([
      expect.objectContaining({ state: "running", name: "agent-bridge/gl" }),
      expect.objectContaining({ state: "success", name: "agent-bridge/gl" }),
    ]);
    // The note made at the start is the one that holds the result.
    const created = gitlab.requests.filter((r) => r.method === "POST" && r.path === notes);
    expect(created).toHaveLength(1);
    expect(final.method).toBe("PUT");
  });

  it("retries a reply the forge answered 502, and it lands once", async () => {
    await fake.setScenario(streamedReply(["Retried."]));
    github.failNext({ method: "POST", path: /\/issues\/102\/comments$/, status: 502 });
    const runId = await commentOnPr(102);
    const [comment] = await settled(runId);
    expect(comment).toMatchObject({ kind: "comment", state: "posted", last_error: null });
    expect(comment?.attempts).toBeGreaterThan(1);
    const posts = github.requests.filter((r) => r.method === "POST" && r.path === commentsOf(102));
    expect(posts.map((r) => r.status)).toEqual([502, 201]);
    // The comment's last body sent holds the result (made so, or updated to it).
    const sent = github.requests.filter((r) => r.status < 300 && bodyText(r.body).includes(runId));
    expect(bodyText(sent.at(-1)?.body)).toContain("Retried.");
  });

  it("waits as long as a secondary rate limit's Retry-After says before it tries again", async () => {
    await fake.setScenario(streamedReply(["Patient."]));
    github.failNext({
      method: "POST",
      path: /\/issues\/103\/comments$/,
      status: 403,
      headers: { "retry-after": "1" },
      body: { message: "You have exceeded a secondary rate limit." },
    });
    const runId = await commentOnPr(103);
    await github.waitFor((r) => r.path === commentsOf(103) && r.status === 403);
    const limited = Date.now();
    const pending = await until(async () => {
      const [comment] = await repliesOf(runId);
      return comment?.last_error === "rate_limited" && comment;
    });
    expect(pending).toMatchObject({ state: "pending", last_status: 403 });
    await github.waitFor((r) => r.path === commentsOf(103) && r.status === 201);
    // The backoff alone would have tried again within 20 ms.
    expect(Date.now() - limited).toBeGreaterThanOrEqual(900);
    const [comment] = await settled(runId);
    expect(comment).toMatchObject({ state: "posted", last_error: null });
  });

  it("records a 404 as failed at once and never tries that reply again", async () => {
    await fake.setScenario(streamedReply(["Nobody reads this."]));
    github.failNext({ method: "POST", path: /\/issues\/104\/comments$/, status: 404 });
    const runId = await commentOnPr(104);
    const [comment, check] = await settled(runId);
    expect(comment).toMatchObject({
      kind: "comment",
      state: "failed",
      attempts: 1,
      last_status: 404,
      last_error: "http_404",
      url: null,
    });
    // The check, another reply of the same run, went on.
    expect(check).toMatchObject({ kind: "check", state: "posted" });
    // The run's end did not revive it: one request, the refused one.
    await replies.poke();
    expect(github.requests.filter((r) => r.path === commentsOf(104))).toHaveLength(1);
  });

  it("sends nothing for a signed payload whose repository name would steer the token elsewhere", async () => {
    await fake.setScenario(streamedReply(["Hostile."]));
    const before = github.requests.length;
    const body = JSON.stringify({
      action: "created",
      issue: { number: 1, pull_request: {} },
      comment: { body: "@agent-bridge go", user: { login: "mallory" } },
      repository: { full_name: "../../user/keys?x=" },
    });
    const res = await deliver(
      server.url,
      "gh",
      body,
      githubHeaders(SECRET, body, { event: "issue_comment" }),
    );
    const runId = (await res.json()).run_id;
    const replies = await settled(runId);
    expect(replies).toEqual([
      expect.objectContaining({ kind: "comment", state: "failed", attempts: 1 }),
      expect.objectContaining({ kind: "check", state: "failed", attempts: 1 }),
    ]);
    expect(replies[0]?.last_error).toMatch(/repository/);
    expect(github.requests.length).toBe(before);
  });

  it("refuses a reply without a forge token, and a GitLab check run, and shows the defaults", async () => {
    const refused = async (body: Record<string, unknown>) => {
      const res = await fetch(`${server.url}/v1/hooks`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({
          name: `r-${randomBytes(3).toString("hex")}`,
          secret: SECRET,
          prompt_template: "x",
          ...body,
        }),
      });
      expect(res.status).toBe(400);
      return (await res.json()).errors;
    };
    expect(await refused({ verification: "github", reply: {} })).toEqual([
      expect.objectContaining({ path: "reply" }),
    ]);
    expect(await refused({ verification: "bearer", reply: {} })).toEqual([
      expect.objectContaining({ path: "reply" }),
    ]);
    expect(
      await refused({
        verification: "gitlab",
        forge_token: GITLAB_TOKEN,
        reply: { status: "check" },
      }),
    ).toEqual([expect.objectContaining({ path: "reply.status" })]);
    const hook = await (await fetch(`${server.url}/v1/hooks/gh`)).json();
    expect(hook.reply).toEqual({ comment: true, status: "check", review_comments: false });
    const gl = await (await fetch(`${server.url}/v1/hooks/gl`)).json();
    expect(gl.reply).toEqual({ comment: true, status: "status", review_comments: false });
    const github = await createHook(server.url, {
      name: "gh-defaults",
      verification: "github",
      secret: SECRET,
      prompt_template: "x",
      forge_token: GITHUB_TOKEN,
      reply: {},
    });
    expect(github.reply).toEqual({ comment: true, status: "status", review_comments: false });
  });
});

describe.each(BACKENDS)("review comments from a structured output on %s", (backend) => {
  let fake: FakeCli;
  let t: TestApp;
  let server: { url: string; close(): Promise<void> };
  let github: MockForge;

  beforeAll(async () => {
    fake = await fakeCli(streamedReply(["Two remarks."]));
    t = await createTestApp(backend, { ...fake.bridgeEnv, ...ENV });
    server = await listen(t.app);
    github = await startMockForge({ forge: "github", token: GITHUB_TOKEN });
    await createHook(server.url, {
      name: "review",
      verification: "github",
      secret: SECRET,
      prompt_template: "Review {{payload.pull_request.number}}",
      forge: { api_url: github.url },
      forge_token: GITHUB_TOKEN,
      reply: { comment: false, status: "none", review_comments: true },
    });
  });
  afterAll(async () => {
    await server.close();
    await t.close();
    await fake.cleanup();
    await github.close();
  });

  /**
   * A run of the hook for pull request `number`, ended, whose stored completion then carries
   * `structuredOutput` (as a run with an output schema's does), and an outbox that sends its
   * replies only now: the review is made from the stored completion.
   */
  async function reviewed(number: number, structuredOutput: unknown) {
    const body = JSON.stringify({
      action: "opened",
      pull_request: {
        number,
        head: { sha: HEAD, ref: "feature", repo: { full_name: "acme/widgets" } },
        base: { ref: "main", repo: { full_name: "acme/widgets" } },
      },
      repository: { full_name: "acme/widgets" },
      sender: { login: "alice" },
    });
    const res = await deliver(server.url, "review", body, githubHeaders(SECRET, body));
    const runId: string = (await res.json()).run_id;
    await until(async () => isFinished(await getRun(server.url, runId)));
    await t.database.db
      .update(runEventBatches)
      .set({
        events: sql`replace(${runEventBatches.events}, ${"\tcompletion\t{"}, ${`\tcompletion\t{"structured_output":${JSON.stringify(structuredOutput)},`})`,
      })
      .where(eq(runEventBatches.runId, runId));
    const outbox = new ReplyOutbox({
      db: t.database.db,
      logger: t.deps.logger,
      ...t.config.hooks.callback,
      progressMs: t.config.hooks.replyProgressMs,
    });
    await outbox.poke();
    await outbox.stop();
    return (await getRun(server.url, runId)).replies;
  }

  it("posts the line comments of `review_comments` as one review on the pull request's head", async () => {
    const replies = await reviewed(9, {
      summary: "two remarks",
      review_comments: [
        { path: "src/a.ts", line: 3, body: "Off by one." },
        { path: "src/b.ts", line: 10, body: "Unused." },
        // Not of the shape: left out.
        { path: "src/c.ts", line: -1, body: "negative" },
        { path: "src/d.ts", line: 2 },
        "loose text",
      ],
    });
    expect(replies).toEqual([expect.objectContaining({ kind: "review", state: "posted" })]);
    const review = await github.waitFor((r) => r.path === "/repos/acme/widgets/pulls/9/reviews");
    expect(review.body).toMatchObject({
      event: "COMMENT",
      commit_id: HEAD,
      comments: [
        { path: "src/a.ts", line: 3, side: "RIGHT", body: `Off by one.\n\n${REPLY_MARKER}` },
        { path: "src/b.ts", line: 10, side: "RIGHT", body: `Unused.\n\n${REPLY_MARKER}` },
      ],
    });
    expect((review.body as { body: string }).body).toContain(REPLY_MARKER);
  });

  it("skips the review when the structured output has no review_comments", async () => {
    const replies = await reviewed(10, { summary: "nothing to say" });
    expect(replies).toEqual([
      expect.objectContaining({ kind: "review", state: "skipped", attempts: 1 }),
    ]);
    expect(github.requests.some((r) => r.path === "/repos/acme/widgets/pulls/10/reviews")).toBe(
      false,
    );
  });
});

describe.each(BACKENDS)("replies from two instances on one %s database", (backend) => {
  let fake: FakeCli;
  let a: TestApp;
  let b: TestApp;
  const outboxes: ReplyOutbox[] = [];
  let server: { url: string; close(): Promise<void> };
  let github: MockForge;

  beforeAll(async () => {
    fake = await fakeCli(streamedReply(["Once ", "only."]));
    a = await createTestApp(backend, { ...fake.bridgeEnv, ...ENV });
    b = createTestAppOn(a.database, { ...fake.bridgeEnv, ...ENV });
    for (const t of [a, b]) {
      const { replies } = buildHookWorkers(t.deps);
      replies.start();
      outboxes.push(replies);
    }
    server = await listen(a.app);
    github = await startMockForge({ forge: "github", token: GITHUB_TOKEN });
    await createHook(server.url, {
      name: "both",
      verification: "github",
      secret: SECRET,
      prompt_template: "Answer {{payload.comment.body}}",
      forge: { api_url: github.url },
      forge_token: GITHUB_TOKEN,
      reply: { status: "check" },
    });
  });
  afterAll(async () => {
    await server.close();
    for (const outbox of outboxes) await outbox.stop();
    // B shares A's database, which A's close drops: B's runs end first.
    await b.deps.runs.shutdown(0);
    await b.deps.gateway.close();
    await a.close();
    await fake.cleanup();
    await github.close();
  });

  it("post each reply once, however the two outboxes' passes meet", async () => {
    const runIds: string[] = [];
    for (const number of [21, 22, 23]) {
      const body = JSON.stringify({
        action: "created",
        issue: { number, pull_request: {} },
        comment: { body: "@agent-bridge go", user: { login: "alice" } },
        repository: { full_name: "acme/widgets" },
      });
      github.set(`/repos/acme/widgets/pulls/${number}`, { number, head: { sha: HEAD } });
      const res = await deliver(
        server.url,
        "both",
        body,
        githubHeaders(SECRET, body, { event: "issue_comment" }),
      );
      runIds.push((await res.json()).run_id);
    }
    for (const runId of runIds) {
      const replies = await until(async () => {
        const run = await getRun(server.url, runId);
        return isFinished(run) && run.replies.every((r) => r.state === "posted") && run.replies;
      });
      expect(replies.map((r) => r.kind)).toEqual(["comment", "check"]);
    }
    for (const number of [21, 22, 23]) {
      const created = github.requests.filter(
        (r) => r.method === "POST" && r.path === `/repos/acme/widgets/issues/${number}/comments`,
      );
      expect(created).toHaveLength(1);
    }
    const finals = github.requests.filter((r) =>
      String((r.body as { body?: unknown } | undefined)?.body).includes("Once only."),
    );
    expect(finals).toHaveLength(3);
    const checks = github.requests.filter(
      (r) => r.method === "POST" && r.path.endsWith("/check-runs"),
    );
    expect(checks).toHaveLength(3);
    const completed = github.requests.filter(
      (r) => (r.body as { status?: unknown } | undefined)?.status === "completed",
    );
    expect(completed).toHaveLength(3);
  });
});

describe.each(BACKENDS)("progress updates throttled on %s", (backend) => {
  let fake: FakeCli;
  let t: TestApp;
  let replies: ReplyOutbox;
  let server: { url: string; close(): Promise<void> };
  let github: MockForge;

  beforeAll(async () => {
    fake = await fakeCli(streamedReply(["Busy."])); // Longer than the run: no update of its comment is due before its end.
    t = await createTestApp(backend, {
      ...fake.bridgeEnv,
      ...ENV,
      AGENT_BRIDGE_REPLY_PROGRESS_MS: "600000",
    });
    ({ replies } = buildHookWorkers(t.deps));
    replies.start();
    server = await listen(t.app);
    github = await startMockForge({ forge: "github", token: GITHUB_TOKEN });
    await createHook(server.url, {
      name: "busy",
      verification: "github",
      secret: SECRET,
      prompt_template: "Go",
      forge: { api_url: github.url },
      forge_token: GITHUB_TOKEN,
      reply: { status: "none" },
    });
  });
  afterAll(async () => {
    await server.close();
    await replies.stop();
    await t.close();
    await fake.cleanup();
    await github.close();
  });

  it("update a comment at most once per AGENT_BRIDGE_REPLY_PROGRESS_MS, and always at the end", async () => {
    const go = join(fake.dir, "go");
    const shell = { shell: { command: "ls", output: "a" } };
    await fake.setScenario({
      steps: [
        { init: true },
        { waitFile: go },
        shell,
        shell,
        shell,
        shell,
        shell,
        { reply: { parts: ["Busy."] } },
        { succeed: {} },
      ],
    });
    const body = JSON.stringify({
      action: "created",
      issue: { number: 31 },
      comment: { body: "@agent-bridge go", user: { login: "alice" } },
      repository: { full_name: "acme/widgets" },
    });
    const res = await deliver(
      server.url,
      "busy",
      body,
      githubHeaders(SECRET, body, { event: "issue_comment" }),
    );
    const runId: string = (await res.json()).run_id;
    // The comment made at the start, before the tools.
    await github.waitFor((r) => r.method === "POST" && r.path.endsWith("/issues/31/comments"));
    await writeFile(go, "");
    const run = await until(async () => {
      const shown = await getRun(server.url, runId);
      return isFinished(shown) && shown.replies.every((r) => r.state === "posted") && shown;
    });
    expect(run.replies).toEqual([expect.objectContaining({ kind: "comment", state: "posted" })]);
    // Five tools used, yet the comment was made at the start and replaced by the result once.
    const sent = github.requests.filter((r) =>
      String((r.body as { body?: unknown } | undefined)?.body).includes(runId),
    );
    expect(sent.map((r) => r.method)).toEqual(["POST", "PATCH"]);
    expect(String((sent[1]?.body as { body?: unknown } | undefined)?.body)).toContain("Busy.");
  });
});
