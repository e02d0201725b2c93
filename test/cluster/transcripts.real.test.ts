import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestApp, createTestAppOn, httpApi, listen, type TestApp } from "../support/app.js";
import { type ClaudeEnv, makeClaudeEnv } from "../support/claude-env.js";
import { type CodexEnv, makeCodexEnv } from "../support/codex-env.js";
import { BACKENDS } from "../support/db.js";
import { type MockAnthropic, startMockAnthropic } from "../support/mock-anthropic.js";
import { type MockOpenAI, messageTexts, startMockOpenAI } from "../support/mock-openai.js";

// A session's messages landing on different instances, each with a disk (a HOME) of its own: the
// real CLI on each resumes the one conversation, its transcript carried by the database.

describe.each(BACKENDS)("a session moving between instances on %s", (backend) => {
  let mock: MockAnthropic;
  let a: ClaudeEnv;
  let b: ClaudeEnv;
  let first: TestApp;
  let second: TestApp;
  const closers: (() => Promise<void>)[] = [];
  let apis: ReturnType<typeof httpApi>[];

  beforeAll(async () => {
    mock = await startMockAnthropic({ quiet: true });
    [a, b] = [await makeClaudeEnv(mock.url), await makeClaudeEnv(mock.url)];
    // One work dir for both, as instances behind one proxy are configured alike.
    const settings = { AGENT_BRIDGE_WORK_DIR: a.cwd, AGENT_BRIDGE_PERMISSION_MODE: "default" };
    first = await createTestApp(backend, { ...a.env, ...settings });
    second = createTestAppOn(first.database, { ...b.env, ...settings });
    apis = [];
    for (const t of [first, second]) {
      const server = await listen(t.app);
      closers.push(server.close);
      apis.push(httpApi(server.url));
    }
  });
  afterAll(async () => {
    for (const close of closers) await close();
    // B shares A's database, which A's close drops: B's runs are ended (their CLIs gone, which
    // may still be writing in B's HOME) before.
    await second.deps.runs.shutdown(0);
    await first.close();
    await mock.close();
    await a.cleanup();
    await b.cleanup();
  });

  const transcriptsIn = async (env: ClaudeEnv) => {
    const projects = join(env.home, ".claude", "projects");
    const names: string[] = [];
    for (const project of await readdir(projects).catch(() => [])) {
      names.push(...(await readdir(join(projects, project))).filter((n) => n.endsWith(".jsonl")));
    }
    return names;
  };

  it("goes on with the conversation on A, then B, then A again", async () => {
    // Each instance runs its CLIs in sandboxes of its own, which reach its own gateway alone.
    for (const t of [first, second]) expect(t.deps.sandbox).toMatchObject({ enabled: true });
    const [onA, onB] = apis as [ReturnType<typeof httpApi>, ReturnType<typeof httpApi>];
    const session = await onA.newSession();
    const say = async (api: typeof onA, text: string, answer: string) => {
      mock.script({ blocks: [{ type: "text", text: answer }] });
      const res = await api.postMessage(session.id, text, { Accept: "application/json" });
      expect(await res.json()).toMatchObject({ text: answer, run: { status: "succeeded" } });
      return JSON.stringify(mock.mainRequests().at(-1)?.messages);
    };

    await say(onA, "remember apricot", "Noted: apricot.");
    expect(await transcriptsIn(b)).toEqual([]);
    const seenOnB = await say(onB, "and remember quince", "Noted: quince.");
    expect(seenOnB).toContain("remember apricot");
    expect(seenOnB).toContain("Noted: apricot.");
    expect(await transcriptsIn(b)).toEqual([`${session.id}.jsonl`]);

    // A's copy lacks B's turn: it is brought up to date before A resumes.
    const seenOnA = await say(onA, "which two words?", "Apricot and quince.");
    for (const text of [
      "remember apricot",
      "Noted: apricot.",
      "and remember quince",
      "Noted: quince.",
    ]) {
      expect(seenOnA).toContain(text);
    }
  });
});

describe("a codex session moving between instances", () => {
  let mock: MockOpenAI;
  let a: CodexEnv;
  let b: CodexEnv;
  let first: TestApp;
  let second: TestApp;
  const closers: (() => Promise<void>)[] = [];
  const urls: string[] = [];

  beforeAll(async () => {
    mock = await startMockOpenAI({ quiet: true });
    [a, b] = [await makeCodexEnv(mock.url), await makeCodexEnv(mock.url)];
    const settings = {
      AGENT_BRIDGE_AGENTS: "claude,codex",
      AGENT_BRIDGE_WORK_DIR: a.cwd,
      AGENT_BRIDGE_PERMISSION_MODE: "acceptEdits",
    };
    first = await createTestApp("pglite", { ...a.env, ...settings });
    second = createTestAppOn(first.database, { ...b.env, ...settings });
    for (const t of [first, second]) {
      const server = await listen(t.app);
      closers.push(server.close);
      urls.push(server.url);
    }
  });
  afterAll(async () => {
    for (const close of closers) await close();
    // B shares A's database, which A's close drops: B's runs are ended (their CLIs gone, which
    // may still be writing in B's HOME) before.
    await second.deps.runs.shutdown(0);
    await first.close();
    await mock.close();
    await a.cleanup();
    await b.cleanup();
  });

  it("resumes its thread on B after its first turn on A", async () => {
    const [onA, onB] = urls as [string, string];
    const post = (url: string, path: string, body: unknown) =>
      fetch(`${url}${path}`, {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "application/json" },
        body: JSON.stringify(body),
      });
    const session = (await (await post(onA, "/v1/sessions", { agent: "codex" })).json()) as {
      id: string;
    };
    mock.script({ output: [{ type: "message", text: "Noted: PAPAYA." }] });
    const firstRun = await (
      await post(onA, `/v1/sessions/${session.id}/messages`, { text: "Remember PAPAYA" })
    ).json();
    expect(firstRun).toMatchObject({ run: { status: "succeeded" } });

    mock.script({ output: [{ type: "message", text: "It was PAPAYA." }] });
    const second = await (
      await post(onB, `/v1/sessions/${session.id}/messages`, { text: "What was the word?" })
    ).json();
    expect(second).toMatchObject({ text: "It was PAPAYA.", run: { status: "succeeded" } });
    const request = mock.responsesRequests().at(-1);
    expect(messageTexts(request, "user")).toEqual(
      expect.arrayContaining(["Remember PAPAYA", "What was the word?"]),
    );
    expect(messageTexts(request, "assistant")).toContain("Noted: PAPAYA.");
  });
});
