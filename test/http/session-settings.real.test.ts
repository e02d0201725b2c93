import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { worktrees } from "../../src/store/schema.js";
import { createTestApp, type TestApp } from "../support/app.js";
import { appClient, untyped } from "../support/app-client.js";
import { type ClaudeEnv, makeClaudeEnv } from "../support/claude-env.js";
import { REAL_CLI_BACKENDS } from "../support/db.js";
import {
  holdUntilReleased,
  type MockAnthropic,
  type MockTurn,
  startMockAnthropic,
  toolResultText,
} from "../support/mock-anthropic.js";
import { SseReader } from "../support/sse.js";
import { makeRepo, type TestRepo } from "../worktrees/repo.js";

// A session's settings changed by PATCH reach its next run's CLI (the real `claude`, against the
// mock Messages API): the model it calls, the tools it offers, the directories its sandbox shows.
// And GET /v1/sessions/{id}/diff shows what the agent did in its worktree, read by git as the
// agent's tenant, never by the server: a link the agent planted shows as a link.

const bash = (command: string): MockTurn => ({
  blocks: [{ type: "tool_use", name: "Bash", input: { command } }],
});
const say = (text: string): MockTurn => ({ blocks: [{ type: "text", text }] });
/** `git commit` as the agent runs it: the CLI's HOME has no git identity. */
const COMMIT = "git -c user.email=agent@test.invalid -c user.name=agent commit -q";

describe.each(REAL_CLI_BACKENDS)("session settings with the real claude CLI on %s", (backend) => {
  let mock: MockAnthropic;
  let ce: ClaudeEnv;
  let root: string;
  let t: TestApp;

  beforeAll(async () => {
    root = realpathSync(mkdtempSync(join(tmpdir(), "agent-bridge-settings-real-")));
    for (const dir of ["a", "b", "b/shared"]) mkdirSync(join(root, dir));
    mock = await startMockAnthropic({ quiet: true });
    ce = await makeClaudeEnv(mock.url);
    t = await createTestApp(backend, {
      ...ce.env,
      AGENT_BRIDGE_ALLOWED_ROOTS: `${join(root, "a")},${join(root, "b")}`,
      AGENT_BRIDGE_WORK_DIR: join(root, "a"),
      AGENT_BRIDGE_PERMISSION_MODE: "bypassPermissions",
    });
  });
  afterAll(async () => {
    await t.close();
    await mock.close();
    await ce.cleanup();
    rmSync(root, { recursive: true, force: true });
  });

  it("a patch changes the next run's model and takes a disallowed tool out of what the model is offered", async () => {
    const api = appClient(t.app);
    const session = await api.createSession({ model: "claude-sonnet-4-5" });
    mock.script(say("first"));
    expect((await api.send(session.id, "hello")).run.status).toBe("succeeded");
    const first = mock.mainRequests().at(-1);
    expect(first?.model).toBe("claude-sonnet-4-5");
    expect(first?.tools?.map((tool) => tool.name)).toContain("Write");

    await api.updateSession(session.id, {
      model: "bridge-test-model",
      // A tool named alone is taken away; a rule with a pattern leaves its tool offered.
      disallowed_tools: ["Write", "Bash(curl:*)"],
    });
    mock.script(say("second"));
    expect((await api.send(session.id, "again")).run.status).toBe("succeeded");
    const second = mock.mainRequests().at(-1);
    expect(second?.model).toBe("bridge-test-model");
    const offered = second?.tools?.map((tool) => tool.name) ?? [];
    expect(offered).not.toContain("Write");
    expect(offered).toContain("Bash");
  });

  it("a patch while a run is live leaves that run as it started (its every call keeps the old model), and a run queued behind it starts with the patch", async () => {
    const api = appClient(t.app);
    const session = await api.createSession({ model: "claude-sonnet-4-5" });
    const held = holdUntilReleased();
    mock.script({ ...bash("true"), hold: held.hold }, say("after the tool"), say("queued"));
    const before = mock.mainRequests().length;
    const live = api.send(session.id, "work");
    await held.arrived;
    // Stored before the patch: it reads the session's settings when its turn comes.
    const queued = await api.sendAsync(session.id, "then this", { whenBusy: "queue" });
    expect(queued.status).toBe("queued");
    const patched = await api.updateSession(session.id, { model: "bridge-test-model" });
    expect(patched.active_run_id).not.toBeNull();
    held.release();
    expect((await live).run.status).toBe("succeeded");
    await SseReader.of(await t.app.request(`/v1/runs/${queued.id}/events`)).events();
    expect(await api.getRun(queued.id)).toMatchObject({ status: "succeeded" });
    const calls = mock.mainRequests().slice(before);
    expect(calls.map((call) => call.model)).toEqual([
      "claude-sonnet-4-5",
      "claude-sonnet-4-5",
      "bridge-test-model",
    ]);
  });

  it("an add_dir becomes writable in the run's sandbox, as the work dir is, from the next run", async () => {
    const api = appClient(t.app);
    const shared = join(root, "b", "shared");
    const target = join(shared, "from-agent.txt");
    const session = await api.createSession({});
    // Another root is hidden from the run's sandbox: the agent cannot even see it.
    mock.script(bash(`echo made > ${target}; echo "exit=$?"`), say("tried"));
    await api.send(session.id, "write there");
    expect(toolResultText(mock.mainRequests().at(-1))).toContain("exit=1");
    expect(existsSync(target)).toBe(false);

    const patched = await api.updateSession(session.id, { add_dirs: [shared] });
    expect(patched.add_dirs).toEqual([shared]);
    mock.script(bash(`echo made > ${target}; echo "exit=$?"`), say("done"));
    await api.send(session.id, "write there again");
    expect(toolResultText(mock.mainRequests().at(-1))).toContain("exit=0");
    expect(readFileSync(target, "utf8")).toBe("made\n");
  });
});

describe.each(REAL_CLI_BACKENDS)(
  "a worktree session's diff with the real claude CLI on %s",
  (backend) => {
    let mock: MockAnthropic;
    let ce: ClaudeEnv;
    let repo: TestRepo;
    let t: TestApp;
    let secret: string;

    beforeAll(async () => {
      mock = await startMockAnthropic({ quiet: true });
      ce = await makeClaudeEnv(mock.url);
      repo = await makeRepo();
      // A file outside the worktree the agent links to: the server must never read it for the diff.
      secret = join(repo.root, "outside-secret.txt");
      writeFileSync(secret, "TOP-SECRET-CONTENT\n");
      t = await createTestApp(backend, {
        ...ce.env,
        AGENT_BRIDGE_WORK_DIR: repo.clone,
        AGENT_BRIDGE_WORKTREE_ENABLED: "true",
        AGENT_BRIDGE_PERMISSION_MODE: "bypassPermissions",
      });
    });
    afterAll(async () => {
      await t.close();
      await mock.close();
      await ce.cleanup();
      await repo.cleanup();
    });

    const runBash = async (id: string, command: string) => {
      mock.script(bash(command), say("Done."));
      const done = await appClient(t.app).send(id, `run: ${command}`);
      expect(done.run.status).toBe("succeeded");
    };
    const diffOf = (id: string) =>
      appClient(t.app).GET("/v1/sessions/{id}/diff", { params: { path: { id } } });

    it("shows committed, uncommitted and untracked changes against the base commit, a planted link as a link, ignored files not at all", async () => {
      const api = appClient(t.app);
      const session = await api.createSession({});
      await runBash(
        session.id,
        [
          `echo one > committed.txt && git add committed.txt && ${COMMIT} -m one`,
          "echo changed >> README.md",
          "printf 'a\\nb\\n' > untracked.txt",
          `ln -s ${secret} leak`,
          "echo '*.log' >> .gitignore && echo hidden > debug.log",
        ].join(" && "),
      );
      const wt = (await api.getSession(session.id)).git_worktree;
      expect(wt?.base_commit).toMatch(/^[0-9a-f]{40}$/);

      const diff = await api.sessionDiff(session.id);
      expect(diff.base_commit).toBe(wt?.base_commit);
      expect(diff.truncated).toBe(false);
      const byPath = Object.fromEntries(diff.files.map((f) => [f.path, f]));
      expect(byPath["committed.txt"]).toEqual({
        path: "committed.txt",
        status: "added",
        additions: 1,
        deletions: 0,
        binary: false,
      });
      expect(byPath["README.md"]).toMatchObject({ status: "modified", additions: 1, deletions: 0 });
      expect(byPath[".gitignore"]).toMatchObject({ status: "modified", additions: 1 });
      expect(byPath["untracked.txt"]).toMatchObject({ status: "added", additions: 2 });
      expect(byPath.leak).toMatchObject({ status: "added", additions: 1, binary: false });
      expect(byPath["debug.log"]).toBeUndefined();
      expect(diff.files).toHaveLength(5);
      // The link as git shows one: its mode and its target, never what it points at.
      expect(diff.diff).toContain(`diff --git a/leak b/leak\nnew file mode 120000`);
      expect(diff.diff).toContain(`+${secret}`);
      expect(diff.diff).not.toContain("TOP-SECRET-CONTENT");
      expect(diff.diff).toContain("+changed");

      const text = await api.sessionDiffText(session.id);
      expect(text).toBe(diff.diff);
      const raw = await t.app.request(`/v1/sessions/${session.id}/diff`, {
        headers: { Accept: "text/x-diff" },
      });
      expect(raw.headers.get("content-type")).toBe("text/x-diff; charset=utf-8");
      expect(raw.headers.get("x-diff-truncated")).toBeNull();
    });

    it("cuts a diff past 1 MiB and says so", async () => {
      const api = appClient(t.app);
      const session = await api.createSession({});
      await runBash(
        session.id,
        "yes 0123456789abcdef | head -c 2000000 > big.txt && echo small > small.txt",
      );
      const diff = await api.sessionDiff(session.id);
      expect(diff.truncated).toBe(true);
      expect(Buffer.byteLength(diff.diff)).toBeLessThanOrEqual(1024 * 1024);
      expect(diff.files.map((f) => f.path).sort()).toEqual(["big.txt", "small.txt"]);
      const raw = await t.app.request(`/v1/sessions/${session.id}/diff`, {
        headers: { Accept: "text/x-diff" },
      });
      expect(raw.headers.get("x-diff-truncated")).toBe("true");
    });

    it("answers with a code when there is no worktree to diff: none of its own, none yet, on another host, removed", async () => {
      const api = appClient(t.app);
      const plain = await api.createSession({ worktree: false });
      const notWorktree = await untyped(t.app.request(`/v1/sessions/${plain.id}/diff`));
      expect(notWorktree.response.status).toBe(409);
      expect(notWorktree.error.code).toBe("not_a_worktree_session");

      const fresh = await api.createSession({});
      const notYet = await diffOf(fresh.id);
      expect(notYet.response.status).toBe(409);
      expect(notYet.error?.code).toBe("worktree_not_found");

      const made = await api.createSession({});
      await runBash(made.id, "echo x > x.txt");
      const { db } = t.database;
      await db
        .update(worktrees)
        .set({ host: "other-host" })
        .where(eq(worktrees.sessionId, made.id));
      const elsewhere = await diffOf(made.id);
      expect(elsewhere.response.status).toBe(409);
      expect(elsewhere.error?.code).toBe("worktree_elsewhere");
      expect(elsewhere.error?.detail).toContain("other-host");

      await db.update(worktrees).set({ state: "removed" }).where(eq(worktrees.sessionId, made.id));
      const removed = await diffOf(made.id);
      expect(removed.response.status).toBe(410);
      expect(removed.error?.code).toBe("worktree_removed");

      const missing = await diffOf(crypto.randomUUID());
      expect(missing.response.status).toBe(404);
    });
  },
);
