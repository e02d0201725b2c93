import { execFileSync } from "node:child_process";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { type AddressInfo, createServer, type Server } from "node:net";
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
// that tenant too, in a sandbox like its runs': the repository is the agent user's, its group's to
// write, and a repository the agent can write to can make git run commands (core.fsmonitor,
// filters), which must reach no more than the tenant's own agent could.

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
    /** Another tenant's work dir: the agent user's group opens it, as every work dir. */
    let other: string;
    /** A port on the host's loopback, and the connections it took. */
    let listener: Server;
    let port: number;
    let connections = 0;

    beforeAll(async () => {
      agent = ensureAgentUser();
      mock = await startMockAnthropic({ quiet: true });
      ce = await makeClaudeEnv(mock.url);
      repo = await makeRepo();
      other = join(repo.root, "other-tenant");
      mkdirSync(other);
      writeFileSync(join(other, "secret.txt"), "another tenant's work\n");
      listener = createServer((socket) => {
        connections += 1;
        socket.destroy();
      });
      await new Promise<void>((resolve) => listener.listen(0, "127.0.0.1", resolve));
      port = (listener.address() as AddressInfo).port;
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
        // The work dirs of a server of several tenants: each session's is one in here.
        AGENT_BRIDGE_ALLOWED_ROOTS: repo.root,
        AGENT_BRIDGE_WORKTREE_ENABLED: "true",
        AGENT_BRIDGE_PERMISSION_MODE: "bypassPermissions",
      });
      server = await listen(t.app);
    });
    afterAll(async () => {
      await server?.close();
      await t?.close();
      await mock?.close();
      listener?.close();
      await ce?.cleanup();
      await repo?.cleanup();
      rmSync(homes, { recursive: true, force: true });
    });

    it("makes the worktree as the tenant's user, and never runs the repository's commands as the server", async () => {
      const session = await (await fetch(`${server.url}/v1/sessions`, { method: "POST" })).json();
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

      // What an agent could plant in its repository (the CLI refuses `git config core.fsmonitor`,
      // not a shell's write to .git/config): commands git runs, whoever runs git. Each one writes
      // who it ran as, what it sees of another tenant's work dir, and whether it reached a port of
      // the host's loopback, then does its job (a filter passes its input through).
      const probe = join(repo.clone, ".git", "probe.sh");
      const out = join(repo.clone, ".git", "probe.out");
      writeFileSync(
        probe,
        [
          "{",
          '  echo "ran $1 as $(id -u)"',
          `  echo "other: $(ls -A ${other} 2>/dev/null | tr '\\n' ' ')"`,
          `  if bash -c 'exec 3<>/dev/tcp/127.0.0.1/${port}' 2>/dev/null; then echo connected; else echo unconnected; fi`,
          `} >> ${out}`,
          'if [ "$1" = filter ]; then exec cat; else exit 1; fi',
          "",
        ].join("\n"),
      );
      const gitConfig = join(repo.clone, ".git", "config");
      const set = (key: string, value: string) =>
        execFileSync("git", ["config", "--file", gitConfig, key, value]);
      set("core.fsmonitor", `sh ${probe} fsmonitor`);
      set("filter.x.clean", `sh ${probe} filter`);
      set("filter.x.smudge", `sh ${probe} filter`);
      mkdirSync(join(repo.clone, ".git", "info"), { recursive: true });
      writeFileSync(join(repo.clone, ".git", "info", "attributes"), "* filter=x\n");
      // A tracked file that looks changed: git status cleans it again to compare.
      const later = new Date(Date.now() + 60_000);
      utimesSync(join(wt.path, "README.md"), later, later);
      shareWithAgents(join(repo.clone, ".git"), agent);

      // Removal asks git whether the worktree is dirty (git status runs the fsmonitor and the
      // clean filter): it is.
      const del = await fetch(`${server.url}/v1/sessions/${session.id}`, { method: "DELETE" });
      expect(await del.json()).toMatchObject({ status: 409, code: "worktree_dirty" });
      const lines = readFileSync(out, "utf8").trim().split("\n");
      // Both ran, each as the tenant's user (not the agent user, whose group opens every work dir),
      // seeing nothing of the other work dir and reaching no port of the host.
      expect(lines).toContain(`ran fsmonitor as ${TENANT_UID_BASE}`);
      expect(lines).toContain(`ran filter as ${TENANT_UID_BASE}`);
      for (const ran of lines.filter((line) => line.startsWith("ran "))) {
        expect(ran).toMatch(new RegExp(` as ${TENANT_UID_BASE}$`));
      }
      expect(lines.filter((line) => line.startsWith("other:"))).not.toContainEqual(
        expect.stringContaining("secret.txt"),
      );
      expect(lines).not.toContain("connected");
      expect(lines).toContain("unconnected");
      expect(connections).toBe(0);
      // And git, as the tenant's user, removes the worktree.
      const forced = await fetch(`${server.url}/v1/sessions/${session.id}?force=true`, {
        method: "DELETE",
      });
      expect(forced.status).toBe(204);
      expect(existsSync(wt.path)).toBe(false);
    });
  },
);
