import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ASK_DENY_MESSAGE } from "../../../src/agents/claude/control.js";
import type { RunRequest } from "../../../src/agents/claude/run-request.js";
import { type RunnerConfig, runClaude } from "../../../src/agents/claude/runner.js";
import { BridgeEvent, type CompletionEvent } from "../../../src/events.js";
import {
  BRIDGE_FLAGS,
  CLAUDE_BIN,
  type ClaudeEnv,
  makeClaudeEnv,
  runCli,
} from "../../support/claude-env.js";
import { type Cleanups, undo } from "../../support/cleanups.js";
import { startHttpsPage } from "../../support/https-page.js";
import {
  holdUntilReleased,
  type MessagesBody,
  type MockAnthropic,
  type MockTurn,
  startMockAnthropic,
} from "../../support/mock-anthropic.js";

// The runner (src/agents/claude/runner.ts) driving the real `claude` binary against the mock Messages
// API: what a client would see, checked against what the model was sent and what the CLI said.

const cleanups: Cleanups = [];
afterEach(async () => {
  await undo(cleanups);
});

async function setup(): Promise<{ mock: MockAnthropic; ce: ClaudeEnv; config: RunnerConfig }> {
  const mock = await startMockAnthropic();
  const ce = await makeClaudeEnv(mock.url);
  cleanups.push(
    () => mock.close(),
    () => ce.cleanup(),
  );
  const config: RunnerConfig = {
    bin: CLAUDE_BIN,
    env: ce.env,
    timeoutMs: 45_000,
    idleTimeoutMs: 30_000,
    maxLineBytes: 16 * 1024 * 1024,
    stderrTailBytes: 64 * 1024,
    killGraceMs: 2000,
  };
  return { mock, ce, config };
}

function request(ce: ClaudeEnv, prompt: string, extra: Partial<RunRequest> = {}): RunRequest {
  return {
    prompt,
    claudeSessionId: randomUUID(),
    resume: false,
    permissionMode: "bypassPermissions",
    cwd: ce.cwd,
    ...extra,
  };
}

async function collect(req: RunRequest, config: RunnerConfig, signal?: AbortSignal) {
  const events: BridgeEvent[] = [];
  for await (const batch of runClaude(req, config, signal)) events.push(...batch);
  // Every event the runner yields is a valid BridgeEvent.
  for (const e of events) expect(() => BridgeEvent.parse(e)).not.toThrow();
  const completions = events.filter((e): e is CompletionEvent => e.type === "completion");
  expect(completions).toHaveLength(1);
  expect(events.at(-1)?.type).toBe("completion");
  return { events, completion: completions[0] as CompletionEvent };
}

const of = <T extends BridgeEvent["type"]>(events: BridgeEvent[], type: T) =>
  events.filter((e): e is Extract<BridgeEvent, { type: T }> => e.type === type);

function userTexts(body: MessagesBody | undefined): string[] {
  return (body?.messages ?? [])
    .filter((m) => m.role === "user")
    .flatMap((m) =>
      typeof m.content === "string" ? [{ type: "text", text: m.content }] : m.content,
    )
    .filter((c) => c.type === "text")
    .map((c) => String(c.text));
}

/** A turn in which the model calls one tool. */
const use = (id: string, name: string, input: Record<string, unknown>): MockTurn => ({
  blocks: [{ type: "tool_use", id, name, input }],
});

const QUESTIONS = [
  {
    question: "Which database should I use?",
    header: "Database",
    multiSelect: false,
    options: [
      { label: "Postgres", description: "A server" },
      { label: "SQLite", description: "A file" },
    ],
  },
];

describe("runClaude with the real CLI", () => {
  it("streams text as several text_deltas that add up to the model's text exactly, and reports the usage the mock sent and the cost the CLI computed", async () => {
    const { mock, ce, config } = await setup();
    const text = "Héllo — this reply streams in pieces, with unicode ✓ and\nnew lines.";
    const usage = {
      input_tokens: 1200,
      output_tokens: 45,
      cache_read_input_tokens: 800,
      cache_creation_input_tokens: 300,
    };
    const turn: MockTurn = { blocks: [{ type: "text", text }], usage };
    mock.script(turn);
    const req = request(ce, "Say hello");
    const { events, completion } = await collect(req, config);
    const deltas = of(events, "text_delta");
    expect(deltas.length).toBeGreaterThan(2);
    expect(deltas.map((d) => d.text).join("")).toBe(text);
    expect(completion).toMatchObject({
      status: "succeeded",
      is_error: false,
      result: text,
      error: null,
    });
    expect(completion.usage).toMatchObject({
      input_tokens: 1200,
      output_tokens: 45,
      cache_read_tokens: 800,
      cache_creation_tokens: 300,
      num_turns: 1,
    });
    expect(completion.claude_session_id).toBe(req.claudeSessionId);
    expect(completion.last_message_uuid).toMatch(/^[0-9a-f-]{36}$/);

    // The same turn straight through the CLI: its result line's cost is the completion's.
    mock.script(turn);
    const direct = await runCli(ce, {
      args: [
        ...BRIDGE_FLAGS,
        "--session-id",
        randomUUID(),
        "--permission-mode",
        "bypassPermissions",
      ],
      prompt: "Say hello",
    });
    const result = direct.lines.find((l) => l.type === "result");
    expect(result?.total_cost_usd).toBeGreaterThan(0);
    expect(completion.cost_usd).toBe(result?.total_cost_usd);
  });

  it("describes the file tools the CLI really ran as data, each closed by its tool_update", async () => {
    // CLI 2.1.328 offers no Grep, Glob or TodoWrite (it searches through Bash): the other kinds
    // are the mapper's tests' (test/agents/claude/mapper.unit.test.ts).
    const { mock, ce, config } = await setup();
    const file = join(ce.cwd, "notes.txt");
    mock.script(
      use("toolu_write", "Write", { file_path: file, content: "hello world\n" }),
      use("toolu_read", "Read", { file_path: file }),
      use("toolu_edit", "Edit", { file_path: file, old_string: "hello", new_string: "bye" }),
      use("toolu_rewrite", "Write", { file_path: file, content: "bye all\n" }),
      { blocks: [{ type: "text", text: "Done." }] },
    );
    const { events, completion } = await collect(request(ce, "Take notes"), config);
    expect(completion).toMatchObject({ status: "succeeded", result: "Done." });
    expect(await readFile(file, "utf8")).toBe("bye all\n");
    const call = (id: string) =>
      of(events, "tool_call").find((e) => e.tool_use_id === id)?.normalized;
    expect(call("toolu_write")).toEqual({
      kind: "modify_file",
      changes: [{ file_path: file, operation: "write", new_content: "hello world\n" }],
    });
    expect(call("toolu_read")).toEqual({ kind: "read_file", file_path: file });
    expect(call("toolu_edit")).toEqual({
      kind: "modify_file",
      changes: [
        {
          file_path: file,
          operation: "edit",
          old_content: "hello",
          new_content: "bye",
          diff: `--- ${file}\n+++ ${file}\n@@ -1,1 +1,1 @@\n-hello\n\\ No newline at end of file\n+bye\n\\ No newline at end of file\n`,
        },
      ],
    });
    // Each call ends once, as it went.
    expect(
      of(events, "tool_update").map((u) => [u.tool_use_id, u.status, u.normalized.kind]),
    ).toEqual([
      ["toolu_write", "complete", "modify_file"],
      ["toolu_read", "complete", "read_file"],
      ["toolu_edit", "complete", "modify_file"],
      ["toolu_rewrite", "complete", "modify_file"],
    ]);
    // A Write's call says only what the file will hold; its result, what it held.
    const update = (id: string) =>
      of(events, "tool_update").find((e) => e.tool_use_id === id)?.normalized;
    expect(update("toolu_write")).toEqual({
      kind: "modify_file",
      changes: [
        {
          file_path: file,
          operation: "create",
          new_content: "hello world\n",
          diff: `--- ${file}\n+++ ${file}\n@@ -0,0 +1,1 @@\n+hello world\n`,
        },
      ],
    });
    expect(update("toolu_rewrite")).toEqual({
      kind: "modify_file",
      changes: [
        {
          file_path: file,
          operation: "write",
          old_content: "bye world\n",
          new_content: "bye all\n",
          diff: `--- ${file}\n+++ ${file}\n@@ -1,1 +1,1 @@\n-bye world\n+bye all\n`,
        },
      ],
    });
  });

  it("describes a web fetch, a notebook edit and a subagent the CLI really ran as data, each closed by its tool_update", async () => {
    const { mock, ce, config } = await setup();
    const page = await startHttpsPage("The page says hello.");
    cleanups.push(() => page.close());
    // Else the CLI first asks claude.ai whether the domain may be fetched: nothing leaves the machine.
    await mkdir(join(ce.home, ".claude"));
    await writeFile(
      join(ce.home, ".claude", "settings.json"),
      JSON.stringify({ skipWebFetchPreflight: true }),
    );
    const notebook = join(ce.cwd, "nb.ipynb");
    const cell = { cell_type: "code", id: "c1", metadata: {}, source: ["print(1)"], outputs: [] };
    await writeFile(
      notebook,
      JSON.stringify({
        cells: [{ ...cell, execution_count: null }],
        metadata: {},
        nbformat: 4,
        nbformat_minor: 5,
      }),
    );
    const task = {
      description: "Gather notes",
      prompt: "Gather the notes, subagent",
      subagent_type: "general-purpose",
    };
    mock.script(
      use("toolu_fetch", "WebFetch", { url: page.url, prompt: "What does it say?" }),
      // The CLI edits only a notebook it has read.
      use("toolu_read_nb", "Read", { file_path: notebook }),
      use("toolu_nb", "NotebookEdit", {
        notebook_path: notebook,
        cell_id: "c1",
        new_source: "print(2)",
      }),
      use("toolu_agent", "Agent", task),
      { blocks: [{ type: "text", text: "Done." }] },
    );
    mock.scriptFor(task.prompt, { blocks: [{ type: "text", text: "Notes." }] });
    const { events, completion } = await collect(request(ce, "Look around"), {
      ...config,
      env: { ...config.env, NODE_EXTRA_CA_CERTS: page.cert },
    });
    expect(completion).toMatchObject({ status: "succeeded", result: "Done." });
    // The CLI fetched the page and had its small model read it (a side request, which the mock
    // answers with its side answer): that answer is the tool's result.
    expect(page.requests).toEqual(["/page"]);
    expect(JSON.stringify(mock.requests.filter((r) => r.kind === "side"))).toContain(
      "The page says hello.",
    );
    expect(of(events, "tool_result").find((r) => r.tool_use_id === "toolu_fetch")).toMatchObject({
      is_error: false,
      content: "Mock side answer",
    });
    expect(JSON.parse(await readFile(notebook, "utf8")).cells[0].source).toBe("print(2)");
    expect(
      of(events, "tool_call").map((e) => [e.tool_use_id, e.tool_name, e.kind, e.normalized]),
    ).toEqual([
      ["toolu_fetch", "WebFetch", "http_request", { kind: "http_request", url: page.url }],
      ["toolu_read_nb", "Read", "read_file", { kind: "read_file", file_path: notebook }],
      [
        "toolu_nb",
        "NotebookEdit",
        "modify_file",
        {
          kind: "modify_file",
          changes: [{ file_path: notebook, operation: "edit", new_content: "print(2)" }],
        },
      ],
      ["toolu_agent", "Agent", "subagent_task", { kind: "subagent_task", ...task }],
    ]);
    expect(
      of(events, "tool_update").map((u) => [u.tool_use_id, u.status, u.normalized.kind]),
    ).toEqual([
      ["toolu_fetch", "complete", "http_request"],
      ["toolu_read_nb", "complete", "read_file"],
      ["toolu_nb", "complete", "modify_file"],
      // The CLI runs the subagent in the background: the call's result says it has started.
      ["toolu_agent", "complete", "subagent_task"],
    ]);
  });

  it("runs a Bash tool for real, reports its status and sums usage over both turns", async () => {
    const { mock, ce, config } = await setup();
    mock.script(
      {
        blocks: [
          { type: "text", text: "Writing the file." },
          {
            type: "tool_use",
            name: "Bash",
            id: "toolu_runner_bash",
            input: { command: "echo written-by-bash > proof.txt && echo ok", description: "Write" },
          },
        ],
        usage: {
          input_tokens: 500,
          output_tokens: 30,
          cache_read_input_tokens: 100,
          cache_creation_input_tokens: 50,
        },
      },
      {
        blocks: [{ type: "text", text: "Done." }],
        usage: {
          input_tokens: 600,
          output_tokens: 40,
          cache_read_input_tokens: 200,
          cache_creation_input_tokens: 0,
        },
      },
    );
    const { events, completion } = await collect(request(ce, "Write proof.txt"), config);
    expect(await readFile(join(ce.cwd, "proof.txt"), "utf8")).toBe("written-by-bash\n");
    const status = of(events, "status");
    expect(status).toEqual([
      expect.objectContaining({ tool_name: "Bash", tool_use_id: "toolu_runner_bash" }),
    ]);
    expect(of(events, "tool_result")).toEqual([
      expect.objectContaining({ tool_use_id: "toolu_runner_bash", is_error: false, content: "ok" }),
    ]);
    // As data: the command, then its outcome from the CLI's structured result.
    expect(of(events, "tool_call")).toEqual([
      expect.objectContaining({
        kind: "shell_exec",
        normalized: {
          kind: "shell_exec",
          command: "echo written-by-bash > proof.txt && echo ok",
          // Where the CLI runs its commands, as its init line says: the run's work dir.
          work_dir: ce.cwd,
          description: "Write",
          background: false,
        },
      }),
    ]);
    expect(of(events, "tool_update")).toEqual([
      {
        type: "tool_update",
        tool_use_id: "toolu_runner_bash",
        status: "complete",
        normalized: { kind: "shell_exec", exit_code: 0, stdout: "ok", stderr: "" },
      },
    ]);
    // The status comes before the tool's result and before the second turn's text.
    const idx = (pred: (e: BridgeEvent) => boolean) => events.findIndex(pred);
    expect(idx((e) => e.type === "status")).toBeLessThan(idx((e) => e.type === "tool_result"));
    // Two messages, two paragraphs.
    expect(
      of(events, "text_delta")
        .map((d) => d.text)
        .join(""),
    ).toBe("Writing the file.\n\nDone.");
    expect(completion).toMatchObject({
      status: "succeeded",
      result: "Done.",
      usage: {
        input_tokens: 1100,
        output_tokens: 70,
        cache_read_tokens: 300,
        cache_creation_tokens: 50,
        num_turns: 2,
      },
    });
    expect(mock.mainRequests()[1]?.messages.at(-1)?.content).toEqual([
      expect.objectContaining({ type: "tool_result", tool_use_id: "toolu_runner_bash" }),
    ]);
  });

  it("denies a tool that needs approval (permission mode default) and the run still succeeds", async () => {
    const { mock, ce, config } = await setup();
    mock.script(
      {
        blocks: [
          {
            type: "tool_use",
            name: "Bash",
            id: "toolu_runner_denied",
            input: { command: "echo nope > denied.txt", description: "Write" },
          },
        ],
      },
      { blocks: [{ type: "text", text: "I was not allowed." }] },
    );
    const { events, completion } = await collect(
      request(ce, "Write denied.txt", { permissionMode: "default" }),
      config,
    );
    expect(existsSync(join(ce.cwd, "denied.txt"))).toBe(false);
    expect(of(events, "tool_result")).toEqual([
      expect.objectContaining({ tool_use_id: "toolu_runner_denied", is_error: true }),
    ]);
    // The command never ran: no exit code.
    expect(of(events, "tool_update")).toEqual([
      expect.objectContaining({
        status: "error",
        normalized: expect.objectContaining({ kind: "shell_exec", exit_code: null }),
      }),
    ]);
    expect(completion).toMatchObject({ status: "succeeded", result: "I was not allowed." });
    const sent = mock.mainRequests()[1]?.messages.at(-1)?.content as Array<Record<string, unknown>>;
    expect(String(sent[0]?.content)).toContain("Permission to use Bash was denied");
  });

  // The CLI restores the session's cost on --resume: its result line's `total_cost_usd` is the
  // whole session's (here twice one run's), while `usage` is this run's only. A completion's
  // cost_usd must be this run's, or session totals count earlier runs again.
  it("resumes a session: the model sees the first turn again, and the resumed run's cost_usd is that run's cost, not the session's running total", async () => {
    const { mock, ce, config } = await setup();
    mock.script({ blocks: [{ type: "text", text: "Noted: the secret word is PAPAYA." }] });
    const first = request(ce, "Remember PAPAYA");
    const one = await collect(first, config);
    expect(one.completion.status).toBe("succeeded");

    mock.script({ blocks: [{ type: "text", text: "You said PAPAYA." }] });
    const two = await collect({ ...first, prompt: "What was the word?", resume: true }, config);
    expect(two.completion).toMatchObject({
      status: "succeeded",
      result: "You said PAPAYA.",
      claude_session_id: first.claudeSessionId,
    });
    const req = mock.mainRequests()[1];
    const turns = (req?.messages ?? []).filter((m) => m.role !== "system");
    expect(turns.map((m) => m.role)).toEqual(["user", "assistant", "user"]);
    expect(JSON.stringify(turns[1]?.content)).toContain("Noted: the secret word is PAPAYA.");
    expect(userTexts(req)).toEqual(
      expect.arrayContaining(["Remember PAPAYA", "What was the word?"]),
    );

    expect(one.completion.cost_usd).toBeGreaterThan(0);
    expect(two.completion.usage).toMatchObject({ input_tokens: 100, output_tokens: 20 });
    expect(two.completion.cost_usd).toBeCloseTo(one.completion.cost_usd ?? Number.NaN, 10);
  });

  it("prompts that look like CLI flags reach the model as user text", async () => {
    const { mock, ce, config } = await setup();
    for (const prompt of ["--help", "--dangerously-skip-permissions"]) {
      const { completion } = await collect(
        request(ce, prompt, { permissionMode: "default" }),
        config,
      );
      expect(completion).toMatchObject({ status: "succeeded", result: "OK." });
      expect(userTexts(mock.mainRequests().at(-1))).toContain(prompt);
    }
    expect(mock.mainRequests()).toHaveLength(2);
  });

  it("a CLI without credentials fails with agent_not_authenticated, naming the variable to set", async () => {
    const { mock, ce, config } = await setup();
    // No API key, no login under its (fresh) HOME: the CLI answers "Not logged in" by itself.
    const { ANTHROPIC_API_KEY: _, ...env } = ce.env;
    const { events, completion } = await collect(request(ce, "Hello"), { ...config, env });
    expect(completion).toMatchObject({
      status: "failed",
      error_code: "agent_not_authenticated",
      result: null,
    });
    expect(completion.error).toContain("set ANTHROPIC_API_KEY");
    expect(completion.error).toContain("Not logged in");
    expect(of(events, "text_delta")).toHaveLength(0);
    expect(mock.requests).toHaveLength(0);
  });

  it("an AskUserQuestion becomes one user_question event and the turn ends with the question", async () => {
    const { mock, ce, config } = await setup();
    mock.script(
      {
        blocks: [
          {
            type: "tool_use",
            name: "AskUserQuestion",
            id: "toolu_runner_ask",
            input: { questions: QUESTIONS },
          },
        ],
      },
      { blocks: [{ type: "text", text: "Which database: Postgres or SQLite?" }] },
    );
    const { events, completion } = await collect(request(ce, "Set up a database"), config);
    expect(of(events, "user_question")).toEqual([
      {
        type: "user_question",
        tool_use_id: "toolu_runner_ask",
        questions: [
          {
            question: "Which database should I use?",
            header: "Database",
            multi_select: false,
            options: [
              { label: "Postgres", description: "A server" },
              { label: "SQLite", description: "A file" },
            ],
          },
        ],
      },
    ]);
    expect(of(events, "status")).toHaveLength(0);
    const sent = mock.mainRequests()[1]?.messages.at(-1)?.content as Array<Record<string, unknown>>;
    expect(sent[0]).toMatchObject({
      type: "tool_result",
      is_error: true,
      content: ASK_DENY_MESSAGE,
    });
    expect(completion).toMatchObject({
      status: "succeeded",
      result: "Which database: Postgres or SQLite?",
    });
  });
});

// The CLI has its session before the bridge sees its first line, and whether a run got that far
// decides nothing: the next run works with either flag, and continues the conversation when the
// CLI kept one (see claude/resume.ts).
describe("the run after a first run that ended early", () => {
  it.each([true, false])(
    "continues the conversation of a first run cancelled while the API held its answer (resume: %s)",
    async (resume) => {
      const { mock, ce, config } = await setup();
      const held = holdUntilReleased();
      mock.script({ blocks: [{ type: "text", text: "Never sent." }], hold: held.hold });
      const first = request(ce, "Remember KIWI");
      const ac = new AbortController();
      void held.arrived.then(() => ac.abort());
      const one = await collect(first, config, ac.signal);
      held.release();
      expect(one.completion.status).toBe("cancelled");

      mock.script({ blocks: [{ type: "text", text: "You said KIWI." }] });
      const two = await collect({ ...first, prompt: "What was the word?", resume }, config);
      expect(two.completion).toMatchObject({ status: "succeeded", result: "You said KIWI." });
      // The CLI (sent SIGTERM) kept the first message: the model sees it.
      expect(userTexts(mock.mainRequests().at(-1))).toEqual(
        expect.arrayContaining(["Remember KIWI", "What was the word?"]),
      );
    },
  );

  it.each([true, false])(
    "starts the conversation after a first run whose CLI was killed before its init line (resume: %s)",
    async (resume) => {
      const { mock, ce, config } = await setup();
      const first = request(ce, "Lost message");
      const killAtSpawn = { ...config, onSpawn: (pgid: number) => process.kill(-pgid, "SIGKILL") };
      const one = await collect(first, killAtSpawn);
      expect(one.completion).toMatchObject({ status: "failed", claude_session_id: null });
      expect(mock.mainRequests()).toHaveLength(0);

      mock.script({ blocks: [{ type: "text", text: "Fresh start." }] });
      const two = await collect({ ...first, prompt: "Hello again", resume }, config);
      expect(two.completion).toMatchObject({
        status: "succeeded",
        result: "Fresh start.",
        claude_session_id: first.claudeSessionId,
      });
      const seen = userTexts(mock.mainRequests().at(-1));
      expect(seen).toContain("Hello again");
      expect(seen).not.toContain("Lost message");
    },
  );
});
