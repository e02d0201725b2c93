import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { buildCodexArgs, type CodexCommandInput } from "../../../src/agents/codex/command.js";
import { CodexMapper, type CodexMapperOptions } from "../../../src/agents/codex/mapper.js";
import { codexSandboxing } from "../../../src/agents/codex/options.js";
import type { BridgeEvent } from "../../../src/events.js";
import { type Cleanups, undo } from "../../support/cleanups.js";
import {
  CODEX_TEST_KEY,
  type CodexEnv,
  type CodexRun,
  type CodexRunOptions,
  makeCodexEnv,
  runCodex,
} from "../../support/codex-env.js";
import { holdUntilReleased } from "../../support/mock-anthropic.js";
import {
  addFilePatch,
  callOutput,
  type MockOpenAI,
  messageTexts,
  shellCall,
  startMockOpenAI,
} from "../../support/mock-openai.js";
import { testSandbox } from "../../support/sandbox.js";

// The real `codex` binary (0.171.0) against the local mock Responses API, its JSONL read by the
// CodexMapper. These tests prove the mock, the command line and the mapper work together and pin
// down what codex really prints; with UPDATE_FIXTURES=1 they also rewrite
// test/fixtures/codex/<case>.jsonl (described in that folder's README.md).

const FIXTURES = resolve(import.meta.dirname, "../../fixtures/codex");
const UPDATE = process.env.UPDATE_FIXTURES === "1";

const cleanups: Cleanups = [];
afterEach(async () => {
  await undo(cleanups);
});

async function setup(): Promise<{ mock: MockOpenAI; ce: CodexEnv }> {
  const mock = await startMockOpenAI();
  const ce = await makeCodexEnv(mock.url);
  cleanups.push(
    () => mock.close(),
    () => ce.cleanup(),
  );
  return { mock, ce };
}

function save(name: string, run: CodexRun): void {
  if (!UPDATE) return;
  if (!existsSync(FIXTURES)) mkdirSync(FIXTURES, { recursive: true });
  writeFileSync(join(FIXTURES, `${name}.jsonl`), run.stdout);
}

interface MappedRun extends CodexRun {
  events: BridgeEvent[];
  mapper: CodexMapper;
}

/**
 * Runs codex as the bridge does, its command line and its sandbox (codex's own off inside the
 * bridge's, which enforces `command.sandbox`), and feeds its output to a fresh mapper.
 */
async function run(
  ce: CodexEnv,
  command: CodexCommandInput,
  prompt: string,
  mapperOptions: CodexMapperOptions = {},
  extra: Partial<CodexRunOptions> = {},
): Promise<MappedRun> {
  const { codexSandbox, workDirReadOnly } = codexSandboxing(command.sandbox, !!testSandbox);
  const result = await runCodex(ce, {
    args: buildCodexArgs({ ...command, sandbox: codexSandbox }),
    prompt,
    ...(testSandbox ? { sandbox: { sandbox: testSandbox, reach: { workDirReadOnly } } } : {}),
    ...extra,
  });
  const mapper = new CodexMapper(mapperOptions);
  const events = result.lines.flatMap((line) => mapper.push(line));
  return { ...result, events, mapper };
}

const ofType = <T extends BridgeEvent["type"]>(events: BridgeEvent[], type: T) =>
  events.filter((e): e is Extract<BridgeEvent, { type: T }> => e.type === type);

describe("codex 0.171.0 against the mock Responses API", () => {
  it("answers a prompt read from stdin with its text, reasoning and one succeeded completion", async () => {
    const { mock, ce } = await setup();
    mock.script({
      output: [
        { type: "reasoning", text: "The user wants a greeting." },
        { type: "message", text: "Hello there, from the mock." },
      ],
      usage: { input_tokens: 1200, cached_tokens: 800, output_tokens: 45 },
    });
    const r = await run(ce, { sandbox: "read-only" }, "Say hello");
    save("text", r);

    expect(r.code).toBe(0);
    const threadId = r.lines[0]?.thread_id;
    expect(r.lines[0]?.type).toBe("thread.started");
    expect(r.mapper.threadId).toBe(threadId);
    expect(r.events).toEqual([
      { type: "session_status", status: "new", agent_session_id: threadId, model: null },
      { type: "reasoning", text: "The user wants a greeting." },
      { type: "text_delta", text: "Hello there, from the mock." },
      expect.objectContaining({
        type: "completion",
        status: "succeeded",
        is_error: false,
        result: "Hello there, from the mock.",
        error: null,
        cost_usd: null,
        usage: {
          input_tokens: 400,
          cache_read_tokens: 800,
          cache_creation_tokens: 0,
          output_tokens: 45,
          num_turns: 1,
          duration_api_ms: 0,
        },
        agent_session_id: threadId,
      }),
    ]);
    const [request] = mock.responsesRequests();
    expect(messageTexts(request, "user")).toContain("Say hello");
    expect(mock.requests[0]?.headers.authorization).toBe(`Bearer ${CODEX_TEST_KEY}`);
    // Nothing but the model endpoint was called: no update check, plugin or model listing.
    expect(mock.requests.map((q) => `${q.method} ${q.path}`)).toEqual(["POST /v1/responses"]);
  });

  it("runs the shell command the model asks for, shown as status and shell tool_call, and hands its output back", async () => {
    const { mock, ce } = await setup();
    mock.script(
      { output: [shellCall("echo hi", "call_shell1")] },
      { output: [{ type: "message", text: "The command printed hi." }] },
    );
    const r = await run(ce, { sandbox: "read-only" }, "Run echo hi");
    save("shell", r);

    expect(r.code).toBe(0);
    const [status] = ofType(r.events, "status");
    const [call] = ofType(r.events, "tool_call");
    const [result] = ofType(r.events, "tool_result");
    expect(status).toEqual({
      type: "status",
      message: "Using shell…",
      tool_name: "shell",
      tool_use_id: call?.tool_use_id,
    });
    expect(call).toMatchObject({
      tool_name: "shell",
      kind: "shell_exec",
      normalized: { kind: "shell_exec", command: expect.stringContaining("echo hi") },
      input: { command: expect.stringContaining("echo hi") },
    });
    expect(result).toEqual({
      type: "tool_result",
      tool_use_id: call?.tool_use_id,
      is_error: false,
      content: "hi\n",
      truncated: false,
    });
    expect(ofType(r.events, "tool_update")).toEqual([
      {
        type: "tool_update",
        tool_use_id: call?.tool_use_id,
        status: "complete",
        normalized: { kind: "shell_exec", exit_code: 0, output: "hi\n" },
      },
    ]);
    expect(ofType(r.events, "completion")[0]).toMatchObject({
      status: "succeeded",
      result: "The command printed hi.",
      // Two model requests in the turn, 100 + 100 input and 20 + 20 output tokens.
      usage: { input_tokens: 200, output_tokens: 40 },
    });
    expect(callOutput(mock.responsesRequests()[1], "call_shell1")).toContain("hi");
  });

  it("writes a file through apply_patch in workspace-write, shown as a modify_file tool_call with its changes", async () => {
    const { mock, ce } = await setup();
    mock.script(
      { output: [addFilePatch("hello.txt", "hello world", "call_patch1")] },
      { output: [{ type: "message", text: "Wrote hello.txt." }] },
    );
    const r = await run(ce, { sandbox: "workspace-write" }, "Write hello.txt");
    save("file-change", r);

    expect(r.code).toBe(0);
    expect(await readFile(join(ce.cwd, "hello.txt"), "utf8")).toBe("hello world\n");
    const path = join(ce.cwd, "hello.txt");
    const [call] = ofType(r.events, "tool_call");
    expect(ofType(r.events, "status")[0]).toMatchObject({ tool_name: "apply_patch" });
    expect(call).toMatchObject({
      tool_name: "apply_patch",
      kind: "modify_file",
      normalized: { kind: "modify_file", changes: [{ file_path: path, operation: "create" }] },
      input: { changes: [{ path, kind: "add" }] },
    });
    expect(ofType(r.events, "tool_result")[0]).toMatchObject({
      tool_use_id: call?.tool_use_id,
      is_error: false,
      content: `add ${path}`,
    });
    expect(ofType(r.events, "completion")[0]).toMatchObject({ status: "succeeded" });
  });

  it("fails an apply_patch in read-only: the work dir stays unwritten", async () => {
    const { mock, ce } = await setup();
    mock.script(
      { output: [addFilePatch("refused.txt", "not here", "call_patch_ro")] },
      { output: [{ type: "message", text: "Could not write." }] },
    );
    const r = await run(ce, { sandbox: "read-only" }, "Write refused.txt");

    expect(r.code).toBe(0);
    expect(existsSync(join(ce.cwd, "refused.txt"))).toBe(false);
    expect(ofType(r.events, "tool_result")[0]).toMatchObject({ is_error: true });
  });

  it("ends a turn the API refused with a failed completion carrying the API's message, and exit code 1", async () => {
    const { mock, ce } = await setup();
    mock.script({ error: { status: 400, message: "mock failure: bad request" } });
    const r = await run(ce, { sandbox: "read-only" }, "Fail please");
    save("api-error-400", r);

    expect(r.code).toBe(1);
    expect(r.lines.map((l) => l.type)).toEqual([
      "thread.started",
      "turn.started",
      "error",
      "turn.failed",
    ]);
    expect(r.events).toEqual([
      expect.objectContaining({ type: "session_status", agent_session_id: r.mapper.threadId }),
      expect.objectContaining({
        type: "completion",
        status: "failed",
        is_error: true,
        result: null,
        error: "mock failure: bad request",
        error_code: "agent_error",
        agent_session_id: r.mapper.threadId,
      }),
    ]);
    // request_max_retries = 0 in the test config: one request, no retries.
    expect(mock.responsesRequests()).toHaveLength(1);
  });

  it("reports a refused API key as agent_not_authenticated", async () => {
    const { mock, ce } = await setup();
    mock.script({
      error: { status: 401, message: "Incorrect API key provided", code: "invalid_api_key" },
    });
    const r = await run(ce, { sandbox: "read-only" }, "Hello");
    save("api-error-401", r);

    expect(r.code).toBe(1);
    const [completion] = ofType(r.events, "completion");
    expect(completion).toMatchObject({ status: "failed", error_code: "agent_not_authenticated" });
    expect(completion?.error).toContain("OPENAI_API_KEY");
    expect(completion?.error).toContain("Incorrect API key provided");
  });

  it("resumes a thread: the mock sees the first turn in the second request, and the run's usage is its own", async () => {
    const { mock, ce } = await setup();
    mock.script({
      output: [{ type: "message", text: "Noted: the secret word is PAPAYA." }],
      usage: { input_tokens: 100, cached_tokens: 10, output_tokens: 20 },
    });
    const first = await run(ce, { sandbox: "read-only" }, "Remember PAPAYA");
    save("resume-1", first);
    const threadId = first.mapper.threadId ?? "";
    expect(threadId).not.toBe("");

    mock.script({
      output: [{ type: "message", text: "The word was PAPAYA." }],
      usage: { input_tokens: 300, cached_tokens: 50, output_tokens: 30 },
    });
    const second = await run(ce, { sandbox: "read-only", threadId }, "What was the word?", {
      previousTotals: first.mapper.usageTotals,
    });
    save("resume-2", second);

    expect(second.code).toBe(0);
    expect(second.lines[0]).toEqual({ type: "thread.started", thread_id: threadId });
    const request = mock.responsesRequests()[1];
    expect(messageTexts(request, "user")).toEqual(
      expect.arrayContaining(["Remember PAPAYA", "What was the word?"]),
    );
    expect(messageTexts(request, "assistant")).toEqual(["Noted: the secret word is PAPAYA."]);
    // codex's totals are the thread's (400 / 60 / 50); the completion holds this run's share.
    expect(second.lines.at(-1)).toMatchObject({
      usage: { input_tokens: 400, cached_input_tokens: 60, output_tokens: 50 },
    });
    expect(ofType(second.events, "completion")[0]).toMatchObject({
      status: "succeeded",
      result: "The word was PAPAYA.",
      usage: { input_tokens: 250, cache_read_tokens: 50, output_tokens: 30 },
      agent_session_id: threadId,
    });
  });

  it("prints nothing more once its process group gets SIGTERM mid-turn; the mapper's failure() closes the run", async () => {
    const { mock, ce } = await setup();
    const held = holdUntilReleased();
    mock.script({ output: [{ type: "message", text: "Never sent." }], hold: held.hold });
    let pgid = 0;
    const running = run(
      ce,
      { sandbox: "read-only" },
      "Take your time",
      {},
      {
        onSpawn: (pid) => {
          pgid = pid;
        },
      },
    );
    await held.arrived;
    process.kill(-pgid, "SIGTERM");
    const r = await running;
    held.release();
    save("sigterm", r);

    // In the bridge's sandbox bwrap reports its command's death by a signal as 128 + its number.
    expect(testSandbox ? r.code : r.signal).toBe(testSandbox ? 128 + 15 : "SIGTERM");
    expect(r.lines.map((l) => l.type)).toEqual(["thread.started", "turn.started"]);
    // The thread had started: nothing of its turn.
    expect(r.events.map((e) => e.type)).toEqual(["session_status"]);
    expect(r.mapper.done).toBe(false);
    expect(
      r.mapper.failure("cancelled", "cancelled by the client", "cancelled", 1234),
    ).toMatchObject({
      status: "cancelled",
      error: "cancelled by the client",
      error_code: "cancelled",
      duration_ms: 1234,
      agent_session_id: r.mapper.threadId,
    });
  });
});
