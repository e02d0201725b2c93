import { execFileSync } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
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
import { makeRepo, type TestRepo } from "./repo.js";

// Worktree mode with the agents as other OS users: the CLI makes the worktree as its tenant's user,
// and the server's own git commands on the repository (recording, the dirty check, removal) run as
// the agent user, whose the repository is (umask 007 leaves the tenant's files to its group). A repository the agent can write to can make git run commands (core.fsmonitor),
// which must never run as the server.

describe.skipIf(!isRoot).each(REAL_CLI_BACKENDS)(
  "worktree mode as the agent user on %s",
  (backend) => {
    let agent: { uid: number; gid: number };
    let mock: MockAnthropic;
    let ce: ClaudeEnv;
    let repo: TestRepo;
    let homes: string;
    let t: TestApp;
    let server: { url: string; close(): Promise<void> };

    beforeAll(async () => {
      agent = ensureAgentUser();
      mock = await startMockAnthropic({ quiet: true });
      ce = await makeClaudeEnv(mock.url);
      repo = await makeRepo();
      // The repository as the README asks: the agent user's, and its group's to write.
      execFileSync("git", ["config", "core.sharedRepository", "group"], { cwd: repo.clone });
      shareWithAgents(repo.root, agent);
      homes = mkdtempSync(join(tmpdir(), "agent-bridge-homes-"));
      chmodSync(homes, 0o711);
      t = await createTestApp(backend, {
        ...ce.env,
        AGENT_BRIDGE_AGENT_USER: AGENT_USER,
        AGENT_BRIDGE_AGENT_HOMES_DIR: join(homes, "homes"),
        AGENT_BRIDGE_WORK_DIR: repo.clone,
        AGENT_BRIDGE_WORKTREE_ENABLED: "true",
        AGENT_BRIDGE_PERMISSION_MODE: "bypassPermissions",
      });
      server = await listen(t.app);
    });
    afterAll(async () => {
      await server?.close();
      await t?.close();
      await mock?.close();
      await ce?.cleanup();
      await repo?.cleanup();
      rmSync(homes, { recursive: true, force: true });
    });

    it("makes the worktree as the tenant's user, and never runs the repository's commands as the server", async () => {
      const session = await (await fetch(`${server.url}/v1/sessions`, { method: "POST" })).json();
      const marker = join(repo.root, "fsmonitor-ran");
      mock.script(
        {
          blocks: [
            { type: "tool_use", name: "Bash", input: { command: "echo mine > mine.txt; id -u" } },
          ],
        },
        { blocks: [{ type: "text", text: "Done." }] },
      );
      const res = await fetch(`${server.url}/v1/sessions/${session.id}/messages`, {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "application/json" },
        body: JSON.stringify({ text: "write a file" }),
      });
      const body = await res.json();
      expect(body, JSON.stringify(body)).toMatchObject({ run: { status: "succeeded" } });
      // `id -u` printed the uid of the tenant's own (auth is off: tenant 0).
      expect(toolResultText(mock.mainRequests().at(-1)).split("\n")).toContain(
        String(TENANT_UID_BASE),
      );

      const wt = (await (await fetch(`${server.url}/v1/sessions/${session.id}`)).json())
        .git_worktree;
      expect(wt).toMatchObject({ path: join(repo.clone, ".claude", "worktrees", session.id) });
      expect(statSync(join(wt.path, "mine.txt")).uid).toBe(TENANT_UID_BASE);

      // What an agent could plant (the CLI refuses `git config core.fsmonitor`, not a shell's
      // write to .git/config): the next git command there runs it, whoever runs git.
      const gitConfig = join(repo.clone, ".git", "config");
      execFileSync("git", [
        "config",
        "--file",
        gitConfig,
        "core.fsmonitor",
        `touch ${marker}; false`,
      ]);
      execFileSync("chown", [`${agent.uid}:${agent.gid}`, gitConfig]);
      // Removal asks git whether the worktree is dirty (git status runs the fsmonitor): it is.
      const del = await fetch(`${server.url}/v1/sessions/${session.id}`, { method: "DELETE" });
      expect(await del.json()).toMatchObject({ status: 409, code: "worktree_dirty" });
      expect(statSync(marker).uid).toBe(agent.uid);
      // And git, as the agent user, removes the worktree it does not own.
      const forced = await fetch(`${server.url}/v1/sessions/${session.id}?force=true`, {
        method: "DELETE",
      });
      expect(forced.status).toBe(204);
      expect(existsSync(wt.path)).toBe(false);
    });
  },
);
