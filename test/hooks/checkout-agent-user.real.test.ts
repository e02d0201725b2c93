import { chmodSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  AGENT_USER,
  ensureAgentUser,
  isRoot,
  shareWithAgents,
  TENANT_UID_BASE,
} from "../support/agent-user.js";
import { createTestApp, listen, type TestApp } from "../support/app.js";
import { type ClaudeEnv, makeClaudeEnv } from "../support/claude-env.js";
import { REAL_CLI_BACKENDS } from "../support/db.js";
import {
  type MockAnthropic,
  startMockAnthropic,
  toolResultText,
} from "../support/mock-anthropic.js";
import { git, makeRepo, type TestRepo } from "../worktrees/repo.js";
import { createHook, deliver, getRun, githubHeaders, isFinished, until } from "./support.js";

// A checkout hook with the agents as other OS users: the fetch from origin is the server's, into its
// own cache; taking the head from there and making the worktree are the tenant's git's, as every
// git command in a session's repository, never the server's (root's).

const SECRET = "github-secret-0123456789";

describe.skipIf(!isRoot).each(REAL_CLI_BACKENDS)(
  "a checkout hook as the agent user on %s",
  (backend) => {
    let mock: MockAnthropic;
    let ce: ClaudeEnv;
    let repo: TestRepo;
    let homes: string;
    let t: TestApp;
    let server: { url: string; close(): Promise<void> };

    beforeAll(async () => {
      const agent = ensureAgentUser();
      mock = await startMockAnthropic({ quiet: true });
      ce = await makeClaudeEnv(mock.url);
      // Out of the temp dir, which the sandbox replaces with its own (see checkout.real.test.ts);
      // and no allowed roots, under which the sandbox would hide the origin beside the clone.
      repo = await makeRepo("complete", "/var/tmp");
      const author = join(repo.root, "author");
      git(repo.root, "clone", "-q", repo.origin, author);
      await writeFile(join(author, "pr-only.txt"), "pull request\n");
      git(author, "add", "pr-only.txt");
      git(author, "commit", "-q", "-m", "pull request");
      git(author, "push", "-q", "origin", "HEAD:refs/pull/3/head");
      git(repo.clone, "config", "core.sharedRepository", "group");
      // The clone is the tenant's; the origin stays root's, as the server's git fetches from it
      // (git refuses a repository another user owns, and the server's git should).
      shareWithAgents(repo.clone, agent);
      // Found by path on the host's disk, not in a tmpfs the sandbox makes: bubblewrap enters the
      // work dir before the switch to the tenant's user, so its parents must let anyone pass.
      chmodSync(repo.root, 0o771);
      homes = mkdtempSync(join(tmpdir(), "agent-bridge-homes-"));
      chmodSync(homes, 0o711);
      t = await createTestApp(backend, {
        ...ce.env,
        AGENT_BRIDGE_AGENT_USER: AGENT_USER,
        AGENT_BRIDGE_AGENT_HOMES_DIR: join(homes, "homes"),
        AGENT_BRIDGE_WORK_DIR: repo.clone,
        AGENT_BRIDGE_DATA_DIR: join(homes, "data"),
        AGENT_BRIDGE_CHECKOUT_LOCAL_ORIGINS: repo.root,
      });
      server = await listen(t.app);
      await createHook(server.url, {
        name: "review",
        verification: "github",
        secret: SECRET,
        checkout: "pull_request",
        prompt_template: "Review #{{pull_request.number}}",
        permission_mode: "bypassPermissions",
      });
    });
    afterAll(async () => {
      await server?.close();
      await t?.close();
      await mock?.close();
      await ce?.cleanup();
      await repo?.cleanup();
      rmSync(homes, { recursive: true, force: true });
    });

    it("takes the head from the server's cache and makes its worktree as the tenant's user", async () => {
      mock.script(
        { blocks: [{ type: "tool_use", name: "Bash", input: { command: "cat pr-only.txt" } }] },
        { blocks: [{ type: "text", text: "Reviewed." }] },
      );
      // A pull request from a branch of the repository itself: a fork's would run restricted.
      const own = { full_name: "acme/widgets" };
      const body = JSON.stringify({
        action: "opened",
        pull_request: { number: 3, head: { repo: own }, base: { repo: own } },
      });
      const res = await deliver(server.url, "review", body, githubHeaders(SECRET, body));
      expect(res.status).toBe(202);
      const { run_id, session_id } = await res.json();
      const run = await until(
        async () => {
          const r = await getRun(server.url, run_id);
          return isFinished(r) && r;
        },
        60_000,
        "the run",
      );
      expect(run).toMatchObject({ status: "succeeded", result: "Reviewed." });
      expect(toolResultText(mock.mainRequests().at(-1))).toBe("pull request");
      const dir = join(repo.clone, ".claude", "worktrees", session_id);
      expect(statSync(join(dir, "pr-only.txt")).uid).toBe(TENANT_UID_BASE);
      // The fetch from origin was the server's, into a cache only the server can write.
      const caches = join(homes, "data", "checkouts");
      for (const entry of [caches, ...readdirSync(caches).map((e) => join(caches, e))]) {
        const { uid, mode } = statSync(entry);
        expect(uid).toBe(0);
        expect(mode & 0o022).toBe(0);
      }
    });
  },
);
