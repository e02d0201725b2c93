import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestApp, listen, type TestApp } from "../support/app.js";
import { type ClaudeEnv, makeClaudeEnv } from "../support/claude-env.js";
import { BACKENDS } from "../support/db.js";
import { type MockAnthropic, startMockAnthropic } from "../support/mock-anthropic.js";
import { git, gitOk, makeRepo, type TestRepo } from "../worktrees/repo.js";
import { createHook, deliver, getRun, githubHeaders, isFinished, until } from "./support.js";

// A hook with `checkout: pull_request`, end to end: a signed GitHub delivery -> the bridge fetches
// `refs/pull/7/head` from the hook's origin (a bare repository on disk) into its checkout cache,
// and the session's repository takes it from there into the session's worktree -> the real `claude` CLI (against a mock Messages API) runs its Bash tool there. On
// each database, unlike most real-CLI tests: the run carries its checkout in its row.

const SECRET = "github-secret-0123456789";
const PR = 7;

describe.each(BACKENDS)("a hook that checks the pull request out, on %s", (backend) => {
  let mock: MockAnthropic;
  let ce: ClaudeEnv;
  let repo: TestRepo;
  let t: TestApp;
  let server: { url: string; close(): Promise<void> };
  /** A second clone, where the pull request's commits are made and pushed from. */
  let author: string;
  /** The server's data dir, where its checkout caches are. */
  let dataDir: string;

  /** Commits `pr-only.txt` holding `content`; pushes it as the head of pull request `pr`. */
  const pushHead = async (content: string, pr = PR): Promise<string> => {
    await writeFile(join(author, "pr-only.txt"), `${content}\n`);
    git(author, "add", "pr-only.txt");
    git(author, "commit", "-q", "-m", content);
    git(author, "push", "-q", "--force", "origin", `HEAD:refs/pull/${pr}/head`);
    return git(author, "rev-parse", "HEAD");
  };

  beforeAll(async () => {
    mock = await startMockAnthropic({ quiet: true });
    ce = await makeClaudeEnv(mock.url);
    // Not in the temp dir: the sandbox the server's git runs in has a /tmp and /dev/shm of its
    // own, where an origin on the host's would not be found.
    repo = await makeRepo("complete", "/var/tmp");
    author = join(repo.root, "author");
    git(repo.root, "clone", "-q", repo.origin, author);
    git(author, "checkout", "-q", "-b", "feature");
    dataDir = await mkdtemp(join("/var/tmp", "agent-bridge-data-"));
    t = await createTestApp(backend, {
      ...ce.env,
      AGENT_BRIDGE_WORK_DIR: repo.clone,
      AGENT_BRIDGE_DATA_DIR: dataDir,
      // The origin is a bare repository on disk: the server may fetch from there.
      AGENT_BRIDGE_CHECKOUT_LOCAL_ORIGINS: repo.root,
    });
    server = await listen(t.app);
    await createHook(server.url, {
      name: "review",
      verification: "github",
      secret: SECRET,
      checkout: "pull_request",
      prompt_template:
        "Review #{{pull_request.number}} at {{pull_request.head_sha}} ({{pull_request.head_ref}} into {{pull_request.base_ref}})",
      session_key_template: "{{payload.repository.full_name}}#{{payload.pull_request.number}}",
      permission_mode: "bypassPermissions",
    });
  });
  afterAll(async () => {
    await server.close();
    await t.close();
    await mock.close();
    await ce.cleanup();
    await repo.cleanup();
    await rm(dataDir, { recursive: true, force: true });
  });

  const pullRequest = (action: string, number: unknown, sha: string) =>
    JSON.stringify({
      action,
      repository: { full_name: "acme/widgets" },
      pull_request: {
        number,
        head: { sha, ref: "feature", repo: { full_name: "acme/widgets" } },
        base: { ref: "main", repo: { full_name: "acme/widgets" } },
      },
    });
  const send = (body: string, event = "pull_request") =>
    deliver(server.url, "review", body, githubHeaders(SECRET, body, { event }));

  /** The output of the Bash tool in the newest request to the mock. */
  const lastToolOutput = (): string => {
    const messages = mock.mainRequests().at(-1)?.messages ?? [];
    for (const message of [...messages].reverse()) {
      if (!Array.isArray(message.content)) continue;
      const result = message.content.find((b) => b.type === "tool_result");
      if (result) return typeof result.content === "string" ? result.content : "";
    }
    throw new Error("no tool result in the last request");
  };

  /** Delivers `body`, has the agent run `command` with Bash, and returns its session and output. */
  const deliverAndRun = async (body: string, command: string) => {
    mock.script(
      { blocks: [{ type: "tool_use", name: "Bash", input: { command } }] },
      { blocks: [{ type: "text", text: "Reviewed." }] },
    );
    const res = await send(body);
    expect(res.status).toBe(202);
    const receipt = (await res.json()) as { run_id: string; session_id: string };
    const run = await until(
      async () => {
        const r = await getRun(server.url, receipt.run_id);
        return isFinished(r) && r;
      },
      60_000,
      "the run",
    );
    expect(run).toMatchObject({ status: "succeeded", result: "Reviewed." });
    return { sessionId: receipt.session_id, prompt: run.prompt, output: lastToolOutput() };
  };

  it("shows the hook's checkout, with worktree mode it implies and the work dir's origin it pins", async () => {
    const hook = await (await fetch(`${server.url}/v1/hooks/review`)).json();
    expect(hook).toMatchObject({
      checkout: "pull_request",
      worktree: true,
      checkout_origin: repo.origin,
    });
  });

  /** Creates (POST) or changes (PUT) hook `name` with a checkout and `fields`. */
  const putHook = (method: "POST" | "PUT", name: string, fields: Record<string, unknown>) =>
    fetch(`${server.url}/v1/hooks${method === "PUT" ? `/${name}` : ""}`, {
      method,
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({
        ...(method === "POST" ? { name } : {}),
        verification: "github",
        secret: SECRET,
        checkout: "pull_request",
        prompt_template: "Review",
        ...fields,
      }),
    });

  it.each([
    ["an ssh origin", { checkout_origin: "ssh://git@github.com/acme/widgets.git" }],
    ["an scp-like origin", { checkout_origin: "git@github.com:acme/widgets.git" }],
    ["a plain http origin", { checkout_origin: "http://github.com/acme/widgets.git" }],
    ["a command transport", { checkout_origin: "ext::sh -c id" }],
    ["credentials in the origin", { checkout_origin: "https://u:p@github.com/acme/w.git" }],
    ["a link-local origin", { checkout_origin: "https://169.254.169.254/acme/widgets.git" }],
    ["a local origin outside the allowed directories", { checkout_origin: "/etc/widgets.git" }],
    ["an origin without checkout", { checkout: null, checkout_origin: "https://github.com/a/b" }],
  ])("refuses a hook with %s", async (_what, fields) => {
    const res = await putHook("POST", "refused-origin", fields);
    expect(res.status).toBe(400);
    expect((await res.json()).errors).toContainEqual(
      expect.objectContaining({ path: "checkout_origin" }),
    );
  });

  it("keeps a hook's pinned origin through a change that names none, whatever the repository's origin says by then", async () => {
    expect((await putHook("POST", "pinned", {})).status).toBe(201);
    const elsewhere = join(repo.root, "elsewhere.git");
    git(repo.clone, "remote", "set-url", "origin", elsewhere);
    try {
      const res = await putHook("PUT", "pinned", { prompt_template: "Review again" });
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ checkout_origin: repo.origin });
    } finally {
      git(repo.clone, "remote", "set-url", "origin", repo.origin);
    }
    const res = await putHook("PUT", "pinned", { checkout_origin: elsewhere });
    expect(await res.json()).toMatchObject({ checkout_origin: elsewhere });
  });

  it.each([
    ["worktree mode off", { worktree: false }],
    ["a schedule", { schedule: "0 6 * * *" }],
  ])("refuses a checkout hook with %s", async (_what, fields) => {
    const res = await fetch(`${server.url}/v1/hooks`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({
        name: "refused",
        verification: "github",
        secret: SECRET,
        checkout: "pull_request",
        prompt_template: "Review",
        ...fields,
      }),
    });
    expect(res.status).toBe(400);
    expect((await res.json()).errors).toContainEqual(expect.objectContaining({ path: "checkout" }));
  });

  it("runs the agent at the pull request's head, then at its new head after a push; deleting the session removes the worktree", async () => {
    const first = await pushHead("first");
    const one = await deliverAndRun(
      pullRequest("opened", PR, first),
      "pwd && git rev-parse HEAD && cat pr-only.txt",
    );
    const dir = join(repo.clone, ".claude", "worktrees", one.sessionId);
    expect(one.output).toBe(`${dir}\n${first}\nfirst`);
    expect(one.prompt).toBe(`Review #${PR} at ${first} (feature into main)`);
    // Only the session's worktree has the pull request's file; the work dir stays on main.
    expect(existsSync(join(repo.clone, "pr-only.txt"))).toBe(false);

    const second = await pushHead("second");
    const two = await deliverAndRun(
      pullRequest("synchronize", PR, second),
      "pwd && git rev-parse HEAD && cat pr-only.txt",
    );
    expect(two.sessionId).toBe(one.sessionId);
    expect(two.output).toBe(`${dir}\n${second}\nsecond`);
    // The second run resumed the first's conversation.
    expect(JSON.stringify(mock.mainRequests().at(-1)?.messages)).toContain(first);
    // No fetched ref is left behind: the worktree's branch is what keeps the head.
    expect(git(repo.clone, "for-each-ref", "refs/agent-bridge/")).toBe("");

    const res = await fetch(`${server.url}/v1/sessions/${one.sessionId}`, { method: "DELETE" });
    expect(res.status).toBe(204);
    expect(existsSync(dir)).toBe(false);
    expect(gitOk(repo.clone, "rev-parse", "--verify", `refs/heads/worktree-${one.sessionId}`)).toBe(
      false,
    );
  });

  it("lets a .claude/settings.json in the pull request's head allow the agent no tool", async () => {
    await createHook(server.url, {
      name: "review-asking",
      verification: "github",
      secret: SECRET,
      checkout: "pull_request",
      prompt_template: "Review #{{pull_request.number}}",
      session_key_template: "asking-{{pull_request.number}}",
      permission_mode: "default",
    });
    // What a pull request's author could commit: every Bash command allowed without asking.
    await mkdir(join(author, ".claude"), { recursive: true });
    await writeFile(
      join(author, ".claude", "settings.json"),
      JSON.stringify({ permissions: { allow: ["Bash"] } }),
    );
    git(author, "add", "-f", ".claude/settings.json");
    const head = await pushHead("the head with settings", 43);
    git(author, "rm", "-q", "-r", ".claude");
    git(author, "commit", "-q", "-m", "no settings");
    mock.script(
      // A command that writes: one the CLI never runs unasked (a read-only one it may).
      {
        blocks: [
          {
            type: "tool_use",
            name: "Bash",
            input: { command: "cp pr-only.txt copied.txt && cat copied.txt" },
          },
        ],
      },
      { blocks: [{ type: "text", text: "Could not look." }] },
    );
    const body = pullRequest("opened", 43, head);
    const res = await deliver(server.url, "review-asking", body, githubHeaders(SECRET, body));
    expect(res.status).toBe(202);
    const { run_id } = (await res.json()) as { run_id: string };
    await until(async () => isFinished(await getRun(server.url, run_id)), 60_000, "the run");
    // The hook's own mode asks, nobody answers (approvals deny): the command never ran.
    expect(lastToolOutput()).not.toContain("the head with settings");
  });

  it("runs a fork's pull request without the hook's bypass, though the hook has no triggers", async () => {
    const head = await pushHead("a fork's head", 44);
    mock.script(
      {
        blocks: [
          {
            type: "tool_use",
            name: "Bash",
            input: { command: "cp pr-only.txt copied.txt && cat copied.txt" },
          },
        ],
      },
      { blocks: [{ type: "text", text: "Could not look." }] },
    );
    const body = JSON.stringify({
      action: "opened",
      repository: { full_name: "acme/widgets" },
      pull_request: {
        number: 44,
        head: { sha: head, ref: "feature", repo: { full_name: "mallory/widgets" } },
        base: { ref: "main", repo: { full_name: "acme/widgets" } },
      },
    });
    const res = await send(body);
    expect(res.status).toBe(202);
    const { run_id } = (await res.json()) as { run_id: string };
    await until(async () => isFinished(await getRun(server.url, run_id)), 60_000, "the run");
    // Its mode is the default one (asking, with nobody to answer): the command never ran.
    expect(lastToolOutput()).not.toContain("a fork's head");
  });

  it("runs no reference-transaction hook planted in the repository while it fetches", async () => {
    // The agent may write the repository's hooks; the fetch has the network, so it runs none.
    // In .git: the sandbox lets git write there alone.
    const log = join(repo.clone, ".git", "hook.log");
    const hook = join(repo.clone, ".git", "hooks", "reference-transaction");
    await writeFile(hook, `#!/bin/sh\ncat >> '${log}'\nexit 0\n`, { mode: 0o755 });
    try {
      const head = await pushHead("planted", 8);
      const run = await deliverAndRun(pullRequest("opened", 8, head), "git rev-parse HEAD");
      expect(run.output).toBe(head);
      // The worktree's own commands (offline) may run it; the fetch, which made the ref, did not.
      const seen = await readFile(log, "utf8");
      expect(seen).toContain(`refs/heads/worktree-${run.sessionId}`);
      expect(seen).not.toMatch(new RegExp(`^0{40} ${head} refs/agent-bridge/`, "m"));
    } finally {
      await rm(hook, { force: true });
      await rm(log, { force: true });
    }
  });

  it.each([
    ["a number past 32 bits", 2_147_483_648],
    ["a number past safe integers", 1e300],
    ["a negative number", -7],
    ["zero", 0],
    ["a path", "../../heads/main"],
    ["an option", "-x"],
    ["a number in a string", "7"],
    ["a fraction", 7.5],
  ])("refuses a delivery naming %s, starting nothing", async (_what, number) => {
    const res = await send(pullRequest("opened", number, "0".repeat(40)));
    expect(res.status).toBe(422);
    expect(await res.json()).toMatchObject({ code: "checkout_unavailable" });
    const deliveries = await (await fetch(`${server.url}/v1/hooks/review/deliveries`)).json();
    expect(deliveries.data[0]).toMatchObject({ outcome: "failed", run_id: null, session_id: null });
  });

  it("refuses a payload holding U+0000 before reading it", async () => {
    const res = await send(pullRequest("opened", "7\u0000", "0".repeat(40)));
    expect(res.status).toBe(400);
  });

  it("refuses a delivery about no pull request, with the reason recorded", async () => {
    const body = JSON.stringify({ ref: "refs/heads/main", repository: { full_name: "acme/w" } });
    const res = await send(body, "push");
    expect(res.status).toBe(422);
    const problem = await res.json();
    expect(problem.detail).toContain("is not about a pull or merge request");
    const deliveries = await (await fetch(`${server.url}/v1/hooks/review/deliveries`)).json();
    expect(deliveries.data[0]).toMatchObject({
      event: "push",
      outcome: "failed",
      detail: problem.detail,
      run_id: null,
    });
  });

  it("fails the run, without starting the agent, when origin has no such pull request", async () => {
    const requests = mock.mainRequests().length;
    const res = await send(pullRequest("opened", 404, "0".repeat(40)));
    expect(res.status).toBe(202);
    const { run_id } = (await res.json()) as { run_id: string };
    const run = await until(
      async () => {
        const r = await getRun(server.url, run_id);
        return isFinished(r) && r;
      },
      30_000,
      "the run",
    );
    expect(run).toMatchObject({ status: "failed" });
    const events = await (
      await fetch(`${server.url}/v1/runs/${run_id}/events`, {
        headers: { Accept: "text/event-stream" },
      })
    ).text();
    expect(events).toContain('"error_code":"work_dir_not_found"');
    expect(events).toContain("refs/pull/404/head could not be checked out");
    expect(mock.mainRequests()).toHaveLength(requests);
  });
});
