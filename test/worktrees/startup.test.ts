import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { seedDataDir } from "../support/pglite-template.js";
import { runServerToExit, startServer } from "../support/server.js";
import { makeRepo, type RepoShape, type TestRepo } from "./repo.js";

// With worktree mode on, the service refuses to start unless the work dir can make worktrees,
// and says what is missing and how to fix it. (Each data dir is seeded with a migrated cluster:
// these tests are about worktree mode, not a first start's initdb.)

const repos: TestRepo[] = [];
afterAll(async () => {
  for (const repo of repos) await repo.cleanup();
});

async function startIn(shape: RepoShape) {
  const repo = await makeRepo(shape);
  repos.push(repo);
  await seedDataDir(join(repo.root, "data"));
  const result = await runServerToExit({
    AGENT_BRIDGE_WORKTREE_ENABLED: "true",
    AGENT_BRIDGE_WORK_DIR: repo.clone,
    AGENT_BRIDGE_AUTH: "none",
    AGENT_BRIDGE_DATA_DIR: join(repo.root, "data"),
  });
  return { repo, ...result };
}

describe("start-up in worktree mode", () => {
  it("fails when the work dir is not a git repository", async () => {
    const { code, output, repo } = await startIn("not-a-repo");
    expect(code).toBe(1);
    expect(output).toContain(
      "agent-bridge: worktree mode (AGENT_BRIDGE_WORKTREE_ENABLED) cannot start:",
    );
    expect(output).toContain(`${repo.clone} is not a git repository`);
    expect(output).toContain(`git clone <url> ${repo.clone}`);
  });

  it("fails when the repository has no origin remote", async () => {
    const { code, output, repo } = await startIn("no-origin");
    expect(code).toBe(1);
    expect(output).toContain('has no "origin" remote');
    expect(output).toContain(`git -C ${repo.clone} remote add origin <url>`);
  });

  it("fails when origin/HEAD does not resolve, naming `git remote set-head origin --auto`", async () => {
    const { code, output, repo } = await startIn("no-origin-head");
    expect(code).toBe(1);
    expect(output).toContain("origin/HEAD does not resolve");
    expect(output).toContain(`git -C ${repo.clone} remote set-head origin --auto`);
  });

  it("starts, sweeps and stops cleanly when everything is there", async () => {
    const repo = await makeRepo("complete");
    repos.push(repo);
    await seedDataDir(join(repo.root, "data"));
    const server = await startServer({
      AGENT_BRIDGE_WORKTREE_ENABLED: "true",
      AGENT_BRIDGE_WORK_DIR: repo.clone,
      AGENT_BRIDGE_AUTH: "none",
      AGENT_BRIDGE_DATA_DIR: join(repo.root, "data"),
      AGENT_BRIDGE_SESSION_SWEEP_INTERVAL_SECONDS: "1",
    });
    const res = await fetch(`${server.url}/v1/sessions`, { method: "POST" });
    expect(res.status).toBe(201);
    expect(await res.json()).toMatchObject({
      worktree: true,
      git_worktree: null,
      expired_at: null,
    });
    expect(await server.stop("SIGTERM")).toBe(0);
  });
});
