import { randomBytes, randomUUID } from "node:crypto";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPLY_MARKER } from "../../src/forges/marker.js";
import { runs } from "../../src/store/schema.js";
import { createTestApp, listen, type TestApp } from "../support/app.js";
import { BACKENDS } from "../support/db.js";
import { type FakeCli, fakeCli } from "../support/fake-cli.js";
import { streamedReply } from "../support/fake-scenarios.js";
import { type MockForge, startMockForge } from "../support/mock-forge.js";
import { codeBlocks, docSection } from "../support/readme.js";
import { createHook, deliver, getRun, githubHeaders, isFinished, until } from "./support.js";

// Triggers over real HTTP: a signed delivery runs only when it matches one of its hook's triggers,
// from someone the hook trusts (GitHub's association or the labeller's permission, GitLab's access
// level looked up with the hook's token); a pull request from a fork runs restricted. Anything
// else is recorded `ignored` with the reason, and starts nothing.

const SECRET = "trigger-secret-0123456789";
const GH_TOKEN = `ghp_${randomBytes(12).toString("hex")}`;
const GL_TOKEN = `glpat-${randomBytes(12).toString("hex")}`;
const REPO = { full_name: "acme/widgets" };
const FORK = { full_name: "mallory/widgets" };

describe.each(BACKENDS)("hook triggers on %s", (backend) => {
  let fake: FakeCli;
  let t: TestApp;
  let server: { url: string; close(): Promise<void> };
  let github: MockForge;
  let gitlab: MockForge;
  const suffix = randomBytes(3).toString("hex");
  const names = {
    gh: `gh-${suffix}`,
    ghBare: `gh-bare-${suffix}`,
    gl: `gl-${suffix}`,
    glBare: `gl-bare-${suffix}`,
    manual: `manual-${suffix}`,
    plain: `plain-${suffix}`,
    plainFork: `plain-fork-${suffix}`,
  };

  beforeAll(async () => {
    fake = await fakeCli(streamedReply(["Done."]));
    t = await createTestApp(backend, fake.bridgeEnv);
    server = await listen(t.app);
    github = await startMockForge({ forge: "github", token: GH_TOKEN });
    gitlab = await startMockForge({ forge: "gitlab", token: GL_TOKEN });
    github.set("/repos/acme/widgets/collaborators/alice/permission", { permission: "write" });
    github.set("/repos/acme/widgets/collaborators/tracy/permission", { permission: "triage" });
    github.set("/repos/acme/widgets/pulls/7", { head: { repo: REPO }, base: { repo: REPO } });
    github.set("/repos/acme/widgets/pulls/8", { head: { repo: FORK }, base: { repo: REPO } });
    gitlab.set("/api/v4/projects/42/members/all/20", { access_level: 20 });
    gitlab.set("/api/v4/projects/42/members/all/30", { access_level: 30 });
    const prompt_template = "Look at {{event}}";
    const triggers = {
      mention: "@agent-bridge",
      labels: ["agent-review"],
      pull_request: ["opened", "synchronize"],
      manual: true,
    };
    await createHook(server.url, {
      name: names.gh,
      verification: "github",
      secret: SECRET,
      prompt_template,
      permission_mode: "bypassPermissions",
      triggers,
      trusted: { bots: ["helper-bot"] },
      forge: { api_url: github.url },
      forge_token: GH_TOKEN,
    });
    await createHook(server.url, {
      name: names.ghBare,
      verification: "github",
      secret: SECRET,
      prompt_template,
      triggers,
    });
    await createHook(server.url, {
      name: names.gl,
      verification: "gitlab",
      secret: SECRET,
      prompt_template,
      triggers,
      forge: { api_url: `${gitlab.url}/api/v4` },
      forge_token: GL_TOKEN,
    });
    await createHook(server.url, {
      name: names.glBare,
      verification: "gitlab",
      secret: SECRET,
      prompt_template,
      triggers,
    });
    await createHook(server.url, {
      name: names.manual,
      verification: "bearer",
      secret: SECRET,
      prompt_template,
      triggers: { manual: true },
    });
    await createHook(server.url, {
      name: names.plain,
      verification: "github",
      secret: SECRET,
      prompt_template,
    });
    await createHook(server.url, {
      name: names.plainFork,
      verification: "github",
      secret: SECRET,
      prompt_template,
      fork: { permission_mode: "plan" },
    });
  });
  afterAll(async () => {
    await server.close();
    await t.close();
    await fake.cleanup();
    await github.close();
    await gitlab.close();
  });

  const runsStarted = () => t.database.db.$count(runs);

  /** Delivers as GitHub does; every body differs (the same body again is a replay). */
  const fromGithub = async (name: string, event: string, payload: object) => {
    const body = JSON.stringify({ repository: REPO, ...payload, nonce: randomUUID() });
    const res = await deliver(server.url, name, body, githubHeaders(SECRET, body, { event }));
    return { status: res.status, receipt: await res.json() };
  };
  const comment = (body: unknown, user: unknown, association: unknown, number = 7) => ({
    action: "created",
    issue: { number, pull_request: { url: "x" } },
    comment: { body, user, author_association: association },
    sender: user,
  });
  const pullRequest = (action: string, head = REPO, extra: object = {}) => ({
    action,
    pull_request: {
      number: 9,
      body: "",
      user: { login: "alice" },
      author_association: "MEMBER",
      head: { sha: "abc", ref: "topic", repo: head },
      base: { ref: "main", repo: REPO },
    },
    sender: { login: "alice" },
    ...extra,
  });

  const gitlabHeaders = (id: string = randomUUID()) => ({
    "Content-Type": "application/json",
    "X-Gitlab-Token": SECRET,
    "Idempotency-Key": id,
  });
  const fromGitlab = async (name: string, payload: object, id?: string) => {
    const body = JSON.stringify({
      project: { id: 42, path_with_namespace: "acme/widgets" },
      ...payload,
      nonce: randomUUID(),
    });
    const res = await deliver(server.url, name, body, gitlabHeaders(id));
    return { status: res.status, receipt: await res.json() };
  };
  const note = (userId: number, text = "@agent-bridge please look") => ({
    object_kind: "note",
    user: { id: userId, username: `user${userId}` },
    object_attributes: { note: text, noteable_type: "MergeRequest" },
    merge_request: { iid: 3, source_project_id: 42, target_project_id: 42 },
  });

  const accepted = { outcome: "accepted", run_id: expect.any(String) };
  const ignored = (detail: string | RegExp) => ({
    outcome: "ignored",
    run_id: null,
    detail:
      typeof detail === "string" ? expect.stringContaining(detail) : expect.stringMatching(detail),
  });

  describe("a mention", () => {
    it("by a MEMBER runs", async () => {
      const { status, receipt } = await fromGithub(
        names.gh,
        "issue_comment",
        comment("@agent-bridge review this", { login: "mia" }, "MEMBER"),
      );
      expect(status).toBe(202);
      expect(receipt).toMatchObject(accepted);
    });

    it("by a CONTRIBUTOR, by NONE and by a bot is ignored with the reason, and starts nothing", async () => {
      const before = await runsStarted();
      const answers = await Promise.all([
        fromGithub(
          names.gh,
          "issue_comment",
          comment("@agent-bridge go", { login: "carl" }, "CONTRIBUTOR"),
        ),
        fromGithub(
          names.gh,
          "issue_comment",
          comment("@agent-bridge go", { login: "nia" }, "NONE"),
        ),
        fromGithub(
          names.gh,
          "pull_request_review_comment",
          comment("@agent-bridge go", { login: "some-app[bot]", type: "Bot" }, "MEMBER"),
        ),
      ]);
      expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
      expect(answers[0]?.receipt).toMatchObject(
        ignored("@carl is CONTRIBUTOR, not one of OWNER, MEMBER, COLLABORATOR"),
      );
      expect(answers[1]?.receipt).toMatchObject(ignored("@nia is NONE"));
      expect(answers[2]?.receipt).toMatchObject(
        ignored("@some-app[bot] is a bot not listed in trusted.bots"),
      );
      expect(await runsStarted()).toBe(before);
      // The list shows why, as the receipt did.
      const listed = await fetch(`${server.url}/v1/hooks/${names.gh}/deliveries?limit=100`);
      const { data } = (await listed.json()) as { data: { delivery_id: string; detail: string }[] };
      const nia = data.find((d) => d.delivery_id === answers[1]?.receipt.delivery_id);
      expect(nia?.detail).toContain("@nia is NONE");
    });

    it("by a bot the hook lists runs", async () => {
      const { receipt } = await fromGithub(
        names.gh,
        "issue_comment",
        comment("@agent-bridge go", { login: "helper-bot[bot]", type: "Bot" }, "NONE"),
      );
      expect(receipt).toMatchObject(accepted);
    });

    it("is ignored without the handle as a word, and on the bridge's own reply", async () => {
      const member = { login: "mia" };
      const answers = await Promise.all([
        fromGithub(names.gh, "issue_comment", comment("ask @agent-bridge-x", member, "MEMBER")),
        fromGithub(
          names.gh,
          "issue_comment",
          comment(`${REPLY_MARKER}\nYou asked @agent-bridge to look`, member, "MEMBER"),
        ),
      ]);
      expect(answers[0]?.receipt).toMatchObject(
        ignored("mention: the text does not mention @agent-bridge"),
      );
      expect(answers[1]?.receipt).toMatchObject(ignored("the bridge's marker"));
    });

    it("in a new issue's body runs for its author's association", async () => {
      const issue = (association: string) => ({
        action: "opened",
        issue: {
          number: 4,
          body: "@agent-bridge triage this",
          user: { login: "ola" },
          author_association: association,
        },
        sender: { login: "ola" },
      });
      expect((await fromGithub(names.gh, "issues", issue("OWNER"))).receipt).toMatchObject(
        accepted,
      );
      expect((await fromGithub(names.gh, "issues", issue("FIRST_TIMER"))).receipt).toMatchObject(
        ignored("@ola is FIRST_TIMER"),
      );
    });
  });

  describe("a label", () => {
    const labeled = (label: string, sender: string) => ({
      ...pullRequest("labeled", REPO, { label: { name: label } }),
      sender: { login: sender, type: "User" },
    });

    it("added by someone who can push runs; by a triager only, or another label, is ignored", async () => {
      const pushes = await fromGithub(names.gh, "pull_request", labeled("Agent-Review", "alice"));
      expect(pushes.receipt).toMatchObject(accepted);
      const triage = await fromGithub(names.gh, "pull_request", labeled("agent-review", "tracy"));
      expect(triage.receipt).toMatchObject(ignored("@tracy has triage permission"));
      const other = await fromGithub(names.gh, "pull_request", labeled("bug", "alice"));
      expect(other.receipt).toMatchObject(ignored('labels: it adds "bug", none of agent-review'));
    });

    it("on a hook without a token runs by GitHub's own rule (only triage or more can label)", async () => {
      const { receipt } = await fromGithub(names.ghBare, "issues", {
        action: "labeled",
        label: { name: "agent-review" },
        issue: { number: 5 },
        sender: { login: "tracy" },
      });
      expect(receipt).toMatchObject(accepted);
    });
  });

  describe("a pull request action", () => {
    it("in the list runs; another is ignored naming the list", async () => {
      expect(
        (await fromGithub(names.gh, "pull_request", pullRequest("opened"))).receipt,
      ).toMatchObject(accepted);
      expect(
        (await fromGithub(names.gh, "pull_request", pullRequest("closed"))).receipt,
      ).toMatchObject(ignored("pull_request: closed is not in opened, synchronize"));
    });
  });

  describe("manual", () => {
    it("runs a workflow dispatch, and a bearer delivery without a forge payload", async () => {
      const dispatch = await fromGithub(names.gh, "workflow_dispatch", { sender: { login: "x" } });
      expect(dispatch.receipt).toMatchObject(accepted);
      const res = await deliver(server.url, names.manual, JSON.stringify({ ref: "main" }), {
        "Content-Type": "application/json",
        Authorization: `Bearer ${SECRET}`,
      });
      expect(await res.json()).toMatchObject(accepted);
    });

    it("ignores what is none of the hook's triggers, saying which did not match", async () => {
      const { receipt } = await fromGithub(names.gh, "push", { ref: "refs/heads/main" });
      expect(receipt).toMatchObject(
        ignored(
          /^no trigger matches \(mention: push is not .*; labels: push adds no label; pull_request: push is not .*; manual: push is not a dispatch\)$/,
        ),
      );
    });
  });

  describe("GitLab", () => {
    it("runs a Developer's note and ignores a Reporter's, as their access levels say", async () => {
      const developer = await fromGitlab(names.gl, note(30));
      expect(developer.receipt).toMatchObject(accepted);
      const reporter = await fromGitlab(names.gl, note(20));
      expect(reporter.receipt).toMatchObject(ignored("@user20 has access level 20, below 30"));
      const stranger = await fromGitlab(names.gl, note(99));
      expect(stranger.receipt).toMatchObject(ignored("@user99 is no member of the project"));
    });

    it("ignores a note on a hook without a token, saying it needs one", async () => {
      const { receipt } = await fromGitlab(names.glBare, note(30));
      expect(receipt).toMatchObject(
        ignored("the hook needs a forge_token to check who may trigger it"),
      );
    });

    it("a lookup answered 502 fails the delivery; GitLab's retry of the same id runs once the API is back", async () => {
      gitlab.failNext({ path: /\/members\/all\/30$/, status: 502 });
      const id = randomUUID();
      const failed = await fromGitlab(names.gl, note(30), id);
      expect(failed.status).toBe(502);
      expect(failed.receipt).toMatchObject({ code: "forge_unavailable" });
      const listed = await fetch(`${server.url}/v1/hooks/${names.gl}/deliveries?limit=100`);
      const { data } = (await listed.json()) as { data: { delivery_id: string }[] };
      expect(data.find((d) => d.delivery_id === id)).toMatchObject({
        outcome: "failed",
        detail: expect.stringContaining("http_502"),
      });
      const retry = await fromGitlab(names.gl, note(30), id);
      expect(retry.status).toBe(202);
      expect(retry.receipt).toMatchObject({ ...accepted, delivery_id: id, duplicate: false });
    });

    it("runs a merge request update with new commits as synchronize, and one that adds the label", async () => {
      const update = (changes: object, attributes: object = {}) => ({
        object_kind: "merge_request",
        user: { id: 30, username: "user30" },
        object_attributes: {
          iid: 3,
          action: "update",
          source_project_id: 42,
          target_project_id: 42,
          ...attributes,
        },
        changes,
      });
      const pushed = await fromGitlab(names.gl, update({}, { oldrev: "abc" }));
      expect(pushed.receipt).toMatchObject(accepted);
      const label = (title: string) => ({
        labels: { previous: [{ title: "bug" }], current: [{ title: "bug" }, { title }] },
      });
      expect((await fromGitlab(names.gl, update(label("agent-review")))).receipt).toMatchObject(
        accepted,
      );
      expect((await fromGitlab(names.gl, update(label("later")))).receipt).toMatchObject(
        ignored('it adds "later"'),
      );
    });
  });

  describe("a pull request from a fork", () => {
    const argsOf = async (sessionId: string) => {
      const started = await until(async () =>
        (await fake.invocations()).find((r) => r.args.some((a) => a.includes(sessionId))),
      );
      return started.args.join(" ");
    };
    const egressOf = async (runId: string) => {
      const [row] = await t.database.db
        .select({ egress: runs.egress })
        .from(runs)
        .where(eq(runs.id, runId));
      return row?.egress;
    };

    it("runs without the hook's bypass mode and with no egress", async () => {
      const { receipt } = await fromGithub(names.gh, "pull_request", pullRequest("opened", FORK));
      expect(receipt).toMatchObject(accepted);
      expect(await egressOf(receipt.run_id)).toEqual([]);
      const args = await argsOf(receipt.session_id);
      expect(args).toContain("--permission-mode default");
      expect(args).not.toContain("--dangerously-skip-permissions");
      expect(args).not.toContain("bypassPermissions");
    });

    it("stays restricted when retried: its egress list, no bypass, and none of the tools its session allows", async () => {
      const { receipt } = await fromGithub(names.gh, "pull_request", pullRequest("opened", FORK));
      await until(async () => isFinished(await getRun(server.url, receipt.run_id)));
      // Tools allowed without asking would give back what the fork's mode takes away.
      const patched = await fetch(`${server.url}/v1/sessions/${receipt.session_id}`, {
        method: "PATCH",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ allowed_tools: ["Bash"] }),
      });
      expect(patched.status).toBe(200);
      const res = await fetch(`${server.url}/v1/runs/${receipt.run_id}/retry`, {
        method: "POST",
        headers: { "Content-Type": "application/json", Prefer: "respond-async" },
        body: "{}",
      });
      expect(res.status).toBe(202);
      const retry = (await res.json()) as { id: string };
      expect(await egressOf(retry.id)).toEqual([]);
      const invocations = await until(async () => {
        const mine = (await fake.invocations()).filter((r) =>
          r.args.some((a) => a.includes(receipt.session_id)),
        );
        return mine.length === 2 && mine;
      });
      const args = invocations[1]?.args.join(" ") ?? "";
      expect(args).toContain("--permission-mode default");
      expect(args).not.toContain("bypassPermissions");
      expect(args).not.toContain("--allowedTools");
    });

    it("a comment on a pull request looks up where its head lives: a fork's run is restricted, the repository's own is not", async () => {
      const member = { login: "mia" };
      const onFork = await fromGithub(
        names.gh,
        "issue_comment",
        comment("@agent-bridge go", member, "MEMBER", 8),
      );
      const onOwn = await fromGithub(
        names.gh,
        "issue_comment",
        comment("@agent-bridge go", member, "MEMBER", 7),
      );
      expect(await egressOf(onFork.receipt.run_id)).toEqual([]);
      expect(await egressOf(onOwn.receipt.run_id)).toBeNull();
      expect(await argsOf(onOwn.receipt.session_id)).toContain("bypassPermissions");
    });

    it("a hook without triggers that sets `fork` runs a fork's pull request under it", async () => {
      const { receipt } = await fromGithub(
        names.plainFork,
        "pull_request",
        pullRequest("opened", FORK),
      );
      expect(receipt).toMatchObject(accepted);
      expect(await egressOf(receipt.run_id)).toEqual([]);
      expect(await argsOf(receipt.session_id)).toContain("--permission-mode plan");
    });

    it("without a token, a comment's pull request counts as a fork", async () => {
      const { receipt } = await fromGithub(
        names.ghBare,
        "issue_comment",
        comment("@agent-bridge go", { login: "mia" }, "MEMBER", 7),
      );
      expect(await egressOf(receipt.run_id)).toEqual([]);
    });

    it("a hook without triggers is unchanged: a fork's run is not restricted, every delivery runs", async () => {
      const fork = await fromGithub(names.plain, "pull_request", pullRequest("opened", FORK));
      expect(fork.receipt).toMatchObject(accepted);
      expect(await egressOf(fork.receipt.run_id)).toBeNull();
      const stranger = await fromGithub(
        names.plain,
        "issue_comment",
        comment("hi", { login: "z" }, "NONE"),
      );
      expect(stranger.receipt).toMatchObject(accepted);
    });
  });

  describe("hostile payloads", () => {
    it("wrong types and a huge comment are ignored with a reason, never a crash", async () => {
      const member = { login: "mia" };
      const huge = "@agent-bridge-x ".repeat(200_000);
      const answers = await Promise.all([
        fromGithub(names.gh, "issue_comment", comment(42, member, "MEMBER")),
        fromGithub(names.gh, "issue_comment", comment("@agent-bridge go", "mia", { a: 1 })),
        fromGithub(names.gh, "issue_comment", {
          ...comment("@agent-bridge go", member, ["MEMBER"]),
          issue: { number: "7" },
        }),
        fromGithub(names.gh, "issue_comment", comment(huge, member, "MEMBER")),
        fromGithub(names.gh, "issue_comment", { action: "created", comment: [], issue: null }),
        fromGithub(names.gh, "pull_request", { action: ["opened"], pull_request: "x" }),
        fromGitlab(names.gl, { object_kind: "note", user: "x", object_attributes: { note: 7 } }),
      ]);
      for (const { status, receipt } of answers) {
        expect(status).toBe(200);
        expect(receipt).toMatchObject({ outcome: "ignored", detail: expect.any(String) });
      }
    });
  });

  it("the hook of docs/webhooks.md's Triggers runs a member's mention and ignores a contributor's", async () => {
    const [example] = codeBlocks(await docSection("docs/webhooks.md", "Triggers"), "json");
    const name = `doc-${suffix}`;
    await createHook(server.url, {
      ...JSON.parse(example ?? "{}"),
      name,
      secret: SECRET,
      forge: { api_url: github.url },
      forge_token: GH_TOKEN,
    });
    const asked = (association: string) =>
      fromGithub(
        name,
        "issue_comment",
        comment("@agent-bridge review", { login: "mia" }, association),
      );
    expect((await asked("MEMBER")).receipt).toMatchObject(accepted);
    expect((await asked("CONTRIBUTOR")).receipt).toMatchObject(ignored("@mia is CONTRIBUTOR"));
  });

  describe("defining triggers", () => {
    const refused = async (fields: object, path: string) => {
      const res = await fetch(`${server.url}/v1/hooks`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({
          name: `bad-${randomBytes(3).toString("hex")}`,
          verification: "github",
          secret: SECRET,
          prompt_template: "x",
          ...fields,
        }),
      });
      expect(res.status, path).toBe(400);
      expect(res.headers.get("content-type")).toMatch(/problem\+json/);
      expect(JSON.stringify(await res.json()), path).toContain(path);
    };

    it("refuses no trigger, a bad handle, a long label, an unknown action, an unknown level or egress entry", async () => {
      await refused({ triggers: {} }, "triggers");
      await refused({ triggers: { manual: false } }, "triggers");
      await refused({ triggers: { mention: "agent-bridge" } }, "triggers.mention");
      await refused({ triggers: { mention: "@a b" } }, "triggers.mention");
      await refused({ triggers: { labels: ["x".repeat(256)] } }, "triggers.labels.0");
      await refused({ triggers: { labels: ["a\nb"] } }, "triggers.labels.0");
      await refused({ triggers: { labels: [] } }, "triggers.labels");
      await refused({ triggers: { pull_request: ["merged"] } }, "triggers.pull_request.0");
      await refused({ triggers: { manual: "yes" } }, "triggers.manual");
      await refused({ triggers: { comment: true } }, "triggers");
      await refused({ trusted: { gitlab_access_level: 25 } }, "trusted.gitlab_access_level");
      await refused({ trusted: { associations: ["ADMIN"] } }, "trusted.associations.0");
      await refused({ trusted: { bots: ["a/b"] } }, "trusted.bots.0");
      await refused({ fork: { egress: ["http://x.example"] } }, "fork.egress.0");
      await refused({ fork: { permission_mode: "yolo" } }, "fork.permission_mode");
      await refused(
        { verification: "bearer", triggers: { mention: "@agent-bridge" } },
        "triggers.mention",
      );
    });

    it("shows a hook's triggers, and whom it trusts with the defaults in place", async () => {
      const hook = await (await fetch(`${server.url}/v1/hooks/${names.gh}`)).json();
      expect(hook).toMatchObject({
        triggers: { mention: "@agent-bridge", labels: ["agent-review"], manual: true },
        trusted: {
          associations: ["OWNER", "MEMBER", "COLLABORATOR"],
          bots: ["helper-bot"],
          gitlab_access_level: 30,
        },
        fork: { permission_mode: null, egress: [] },
      });
      const plain = await (await fetch(`${server.url}/v1/hooks/${names.plain}`)).json();
      expect(plain).toMatchObject({ triggers: null, fork: null });
    });
  });
});
