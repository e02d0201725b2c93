import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildHookWorkers } from "../../src/app.js";
import { REPLY_MARKER } from "../../src/forges/marker.js";
import type { ReplyOutbox } from "../../src/hooks/reply-outbox.js";
import { createTestApp, listen, type TestApp } from "../support/app.js";
import { type ClaudeEnv, makeClaudeEnv } from "../support/claude-env.js";
import { REAL_CLI_BACKENDS } from "../support/db.js";
import { type MockAnthropic, startMockAnthropic } from "../support/mock-anthropic.js";
import { type MockForge, startMockForge } from "../support/mock-forge.js";
import { createHook, deliver, getRun, githubHeaders, isFinished, until } from "./support.js";

// The whole loop with the real `claude` CLI (against a mock Messages API): a comment on a pull
// request starts a run, which uses a tool and answers; the pull request gets the bridge's comment
// with the answer and a completed check run on its head, from a mock of GitHub's API.

const SECRET = "github-secret-0123456789";
const TOKEN = `ghp_${randomBytes(12).toString("hex")}`;
const HEAD = "fedcba9876543210fedcba9876543210fedcba98";

describe.each(REAL_CLI_BACKENDS)("replies of a real CLI's run on %s", (backend) => {
  let mock: MockAnthropic;
  let ce: ClaudeEnv;
  let t: TestApp;
  let replies: ReplyOutbox;
  let server: { url: string; close(): Promise<void> };
  let github: MockForge;

  beforeAll(async () => {
    mock = await startMockAnthropic({ quiet: true });
    ce = await makeClaudeEnv(mock.url);
    t = await createTestApp(backend, {
      ...ce.env,
      AGENT_BRIDGE_WORK_DIR: ce.cwd,
      AGENT_BRIDGE_REPLY_PROGRESS_MS: "100",
      AGENT_BRIDGE_CALLBACK_POLL_MS: "50",
    });
    ({ replies } = buildHookWorkers(t.deps));
    replies.start();
    server = await listen(t.app);
    github = await startMockForge({ forge: "github", token: TOKEN });
    await createHook(server.url, {
      name: "pr-bot",
      verification: "github",
      secret: SECRET,
      prompt_template: "{{payload.comment.body}}",
      permission_mode: "bypassPermissions",
      forge: { api_url: github.url },
      forge_token: TOKEN,
      reply: { status: "check" },
    });
  });
  afterAll(async () => {
    await server.close();
    await replies.stop();
    await t.close();
    await mock.close();
    await ce.cleanup();
    await github.close();
  });

  it("answers a comment on a pull request with a comment and a completed check", async () => {
    mock.script(
      { blocks: [{ type: "tool_use", name: "Bash", input: { command: "echo checked" } }] },
      { blocks: [{ type: "text", text: "The widgets are wired correctly." }] },
    );
    github.set("/repos/acme/widgets/pulls/8", { number: 8, head: { sha: HEAD } });
    const body = JSON.stringify({
      action: "created",
      issue: { number: 8, pull_request: {} },
      comment: { body: "@agent-bridge check the wiring", user: { login: "alice" } },
      repository: { full_name: "acme/widgets" },
    });
    const res = await deliver(
      server.url,
      "pr-bot",
      body,
      githubHeaders(SECRET, body, { event: "issue_comment" }),
    );
    expect(res.status).toBe(202);
    const runId: string = (await res.json()).run_id;
    const final = await github.waitFor((r) =>
      String((r.body as { body?: unknown } | undefined)?.body).includes(
        "The widgets are wired correctly.",
      ),
    );
    const text = (final.body as { body: string }).body;
    expect(text.startsWith(REPLY_MARKER)).toBe(true);
    expect(text).toContain(`agent-bridge run ${runId}`);
    const completed = await github.waitFor(
      (r) => (r.body as { status?: unknown } | undefined)?.status === "completed",
    );
    expect(completed.body).toMatchObject({
      head_sha: HEAD,
      conclusion: "success",
      name: "agent-bridge/pr-bot",
    });
    const run = await until(async () => {
      const shown = await getRun(server.url, runId);
      return isFinished(shown) && shown.replies.every((r) => r.state === "posted") && shown;
    });
    expect(run.status).toBe("succeeded");
    expect(run.replies.map((r) => r.kind)).toEqual(["comment", "check"]);
    // The comment made at the start said the run was going before it said the result.
    const created = github.requests.find(
      (r) => r.method === "POST" && r.path === "/repos/acme/widgets/issues/8/comments",
    );
    expect(String((created?.body as { body?: unknown } | undefined)?.body)).toContain("is on it");
  });
});
