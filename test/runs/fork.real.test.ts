import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createClient, type FinishedRun, type Session } from "../../src/client/index.js";
import { createTestApp, listen, type TestApp } from "../support/app.js";
import { type ClaudeEnv, makeClaudeEnv } from "../support/claude-env.js";
import { BACKENDS } from "../support/db.js";
import {
  holdUntilReleased,
  type MessagesBody,
  type MockAnthropic,
  startMockAnthropic,
} from "../support/mock-anthropic.js";
import { SseReader } from "../support/sse.js";
import { git, makeRepo, type TestRepo } from "../worktrees/repo.js";

// Forks with the real `claude` binary against the mock Messages API, on each database (the fork's
// transcript is a copy made there): what the model is sent in the fork and in the original after
// the fork, and a worktree session's fork of its worktree, uncommitted changes included.

/** What the model was sent, as one string. */
const sent = (body: MessagesBody | undefined) => JSON.stringify(body?.messages ?? []);
/** `git commit` as the agent runs it: the CLI's HOME has no git identity. */
const COMMIT = "git -c user.email=agent@test.invalid -c user.name=agent commit -q";

describe.each(BACKENDS)("forking sessions with the real claude CLI on %s", (backend) => {
  let mock: MockAnthropic;
  let ce: ClaudeEnv;
  let repo: TestRepo;
  let t: TestApp;
  let server: { url: string; close(): Promise<void> };
  let client: ReturnType<typeof createClient>;

  beforeAll(async () => {
    mock = await startMockAnthropic({ quiet: true });
    ce = await makeClaudeEnv(mock.url);
    repo = await makeRepo();
    t = await createTestApp(backend, {
      ...ce.env,
      AGENT_BRIDGE_WORK_DIR: repo.clone,
      AGENT_BRIDGE_PERMISSION_MODE: "bypassPermissions",
    });
    server = await listen(t.app);
    client = createClient({ baseUrl: server.url });
  });
  afterAll(async () => {
    await server.close();
    await t.close();
    await mock.close();
    await ce.cleanup();
    await repo.cleanup();
  });

  /** One message answered with `text`: its finished run, and what the model was sent for it. */
  const turn = async (sessionId: string, prompt: string, text: string, delayMs?: number) => {
    mock.script({ blocks: [{ type: "text", text }], ...(delayMs ? { delayMs } : {}) });
    const done = await client.send(sessionId, prompt);
    expect(done).toMatchObject({ run: { status: "succeeded" }, text });
    return { done, seen: sent(mock.mainRequests().at(-1)) };
  };
  const untilFinished = async (runId: string) =>
    SseReader.of(await fetch(`${server.url}/v1/runs/${runId}/events`)).events();

  it("the fork's model sees the conversation up to the run it branched after, the original's none of the fork's turns", async () => {
    const original = await client.createSession({ title: "fruit" });
    const apricot = await turn(original.id, "remember apricot", "Noted: apricot.");
    // Each SSE event of the second answer 100 ms apart: over a second of API time.
    const banana = await turn(original.id, "now remember banana", "Noted: banana.", 100);
    const apiMs = (turn: typeof banana) => turn.done.completion.usage.duration_api_ms;
    expect(apiMs(banana)).toBeGreaterThanOrEqual(1000);
    // A third turn of the original is going while the fork is made, and when its first run starts.
    const held = holdUntilReleased();
    mock.script({ blocks: [{ type: "text", text: "Noted: cherry." }], hold: held.hold });
    const third = await client.sendAsync(original.id, "and cherry");
    await held.arrived;

    const fork = await client.forkSession(original.id, { at_run: apricot.done.run.id });
    expect(fork).toMatchObject({
      title: "fruit",
      forked_from: { session_id: original.id, run_id: apricot.done.run.id },
    });
    const first = await turn(fork.id, "which fruit, again?", "Apricot.");
    expect(first.seen).toContain("remember apricot");
    expect(first.seen).toContain("Noted: apricot.");
    expect(first.seen).not.toContain("banana");
    expect(first.seen).not.toContain("cherry");
    // Its run is its own conversation's, and costs its own turn (the original's first turn had
    // the same usage), not the original's running total.
    expect(first.done.completion).toMatchObject({
      agent_session_id: fork.id,
      cost_usd: apricot.done.completion.cost_usd,
    });
    // Its API time too: the CLI's running total went on from the original's (all its finished
    // runs', the slow one included), and the run reports its own, less than the slow run's.
    expect(apiMs(first)).toBeGreaterThan(0);
    expect(apiMs(first)).toBeLessThan(apiMs(banana));
    expect(first.done.run.usage.duration_api_ms).toBe(apiMs(first));

    held.release();
    await untilFinished(third.id);
    const later = await turn(original.id, "all of them?", "Apricot, banana, cherry.");
    expect(later.seen).toContain("Noted: banana.");
    expect(later.seen).toContain("Noted: cherry.");
    expect(later.seen).not.toContain("which fruit, again?");
    expect(later.seen).not.toContain('Apricot."');

    const next = await turn(fork.id, "and before that?", "Nothing.");
    expect(next.seen).toContain("which fruit, again?");
    expect(next.seen).toContain("Noted: apricot.");
    expect(next.seen).not.toContain("banana");
    expect(next.seen).not.toContain("cherry");
    expect(next.seen).not.toContain("all of them?");
    expect(apiMs(next)).toBeLessThan(apiMs(banana));
  });

  /** One message whose turn runs `command` with the Bash tool; returns the tool's output. */
  const bash = async (sessionId: string, command: string): Promise<string> => {
    mock.script(
      { blocks: [{ type: "tool_use", name: "Bash", input: { command } }] },
      { blocks: [{ type: "text", text: "Done." }] },
    );
    const done: FinishedRun = await client.send(sessionId, `run: ${command}`);
    expect(done).toMatchObject({ run: { status: "succeeded" }, text: "Done." });
    const messages = mock.mainRequests().at(-1)?.messages ?? [];
    for (const { content } of [...messages].reverse()) {
      const result = Array.isArray(content) && content.find((b) => b.type === "tool_result");
      if (result) return typeof result.content === "string" ? result.content : "";
    }
    throw new Error("no tool result in the last request");
  };

  it("a worktree session's fork gets a worktree of its own at the original's commit, with its uncommitted changes; neither sees the other's after", async () => {
    const original: Session = await client.createSession({ worktree: true });
    await bash(
      original.id,
      `echo one > one.txt && git add one.txt && ${COMMIT} -m one && echo changed >> README.md && echo new > untracked.txt`,
    );
    const before = await client.getSession(original.id);
    const path = before.git_worktree?.path ?? "";
    const head = git(path, "rev-parse", "HEAD");
    const status = git(path, "status", "--porcelain");

    const fork = await client.forkSession(original.id);
    expect(fork.git_worktree).toMatchObject({
      branch: `worktree-${fork.id}`,
      path: `${repo.clone}/.claude/worktrees/${fork.id}`,
      base_commit: head,
      state: "active",
    });
    // The original's worktree as it was: its changes still uncommitted, its index untouched.
    expect(git(path, "status", "--porcelain")).toBe(status);

    expect(
      await bash(
        fork.id,
        "pwd && git log --format=%s -1 && git status --porcelain && cat untracked.txt && echo fork > fork-only.txt",
      ),
    ).toBe(`${fork.git_worktree?.path}\none\n M README.md\n?? untracked.txt\nnew`);
    expect(await bash(original.id, "pwd && test -e fork-only.txt && echo yes || echo no")).toBe(
      `${path}\nno`,
    );
  });
});
