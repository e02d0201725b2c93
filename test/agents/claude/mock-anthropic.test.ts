import { randomUUID } from "node:crypto";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  BRIDGE_FLAGS,
  type ClaudeEnv,
  type CliRun,
  type CliRunOptions,
  makeClaudeEnv,
  runCli,
  type StreamLine,
} from "../../support/claude-env.js";
import { type Cleanups, undo } from "../../support/cleanups.js";
import {
  type MessagesBody,
  type MockAnthropic,
  type MockTurn,
  startMockAnthropic,
} from "../../support/mock-anthropic.js";

// The real `claude` binary against the local mock Messages API. These tests prove the mock
// works and pin down what the CLI really prints; with UPDATE_FIXTURES=1 they also rewrite
// test/fixtures/stream-json/<case>.ndjson (described in that folder's README.md).

const FIXTURES = resolve(import.meta.dirname, "../../fixtures/stream-json");
const UPDATE = process.env.UPDATE_FIXTURES === "1";

const cleanups: Cleanups = [];
afterEach(async () => {
  await undo(cleanups);
});

async function setup(): Promise<{ mock: MockAnthropic; ce: ClaudeEnv }> {
  const mock = await startMockAnthropic();
  const ce = await makeClaudeEnv(mock.url);
  cleanups.push(
    () => mock.close(),
    () => ce.cleanup(),
  );
  return { mock, ce };
}

function save(name: string, run: CliRun): void {
  if (!UPDATE) return;
  if (!existsSync(FIXTURES)) mkdirSync(FIXTURES, { recursive: true });
  writeFileSync(join(FIXTURES, `${name}.ndjson`), run.stdout);
}

function args(sessionId: string, ...rest: string[]): string[] {
  return [...BRIDGE_FLAGS, "--session-id", sessionId, ...rest];
}

const BYPASS = ["--permission-mode", "bypassPermissions"];

// AskUserQuestion validates its input: `header` and every option's `description` are required
// (without them the tool fails with InputValidationError before any control_request).
const QUESTIONS = [
  {
    question: "Which approach?",
    header: "Approach",
    multiSelect: false,
    options: [
      { label: "A", description: "Rewrite it" },
      { label: "B", description: "Patch it" },
    ],
  },
];

async function scenario(
  name: string | null,
  turns: MockTurn[],
  extra: string[],
  prompt: string,
  opts: Partial<CliRunOptions> = {},
) {
  const { mock, ce } = await setup();
  mock.script(...turns);
  const sessionId = randomUUID();
  const run = await runCli(ce, { args: args(sessionId, ...extra), prompt, ...opts });
  if (name) save(name, run);
  return { mock, ce, run, sessionId };
}

const ofType = (run: CliRun, type: string, subtype?: string) =>
  run.lines.filter((l) => l.type === type && (subtype === undefined || l.subtype === subtype));

function result(run: CliRun): StreamLine & Record<string, unknown> {
  const r = ofType(run, "result");
  expect(r).toHaveLength(1);
  return r[0] as StreamLine;
}

interface Delta {
  type: string;
  text?: string;
  thinking?: string;
  partial_json?: string;
}
function deltas(run: CliRun, type: string): Delta[] {
  return ofType(run, "stream_event")
    .map((l) => l.event as { type: string; delta?: Delta })
    .filter((e) => e.type === "content_block_delta" && e.delta?.type === type)
    .map((e) => e.delta as Delta);
}

/** The tool_result blocks of the `user` lines on stdout. */
function toolResults(run: CliRun): Array<Record<string, unknown>> {
  return ofType(run, "user").flatMap(
    (l) => (l.message as { content: Array<Record<string, unknown>> }).content,
  );
}

function userTexts(body: MessagesBody): string[] {
  return body.messages
    .filter((m) => m.role === "user")
    .flatMap((m) =>
      typeof m.content === "string" ? [{ type: "text", text: m.content }] : m.content,
    )
    .filter((c) => c.type === "text")
    .map((c) => String(c.text));
}

describe("mock Anthropic API + real claude CLI", () => {
  it("streams text as several partial deltas and reports usage and cost", async () => {
    const text = "Hello there, this is a streamed reply.";
    const usage = {
      input_tokens: 1200,
      output_tokens: 45,
      cache_read_input_tokens: 800,
      cache_creation_input_tokens: 300,
    };
    const { mock, run, sessionId, ce } = await scenario(
      "text",
      [{ blocks: [{ type: "text", text }], usage }],
      BYPASS,
      "Say hello",
    );
    expect(run.code).toBe(0);
    const init = ofType(run, "system", "init")[0];
    expect(init).toMatchObject({ session_id: sessionId, cwd: ce.cwd });
    expect(init?.permissionMode).toBe("bypassPermissions");

    const parts = deltas(run, "text_delta").map((d) => d.text);
    expect(parts.length).toBeGreaterThan(2);
    expect(parts.join("")).toBe(text);

    const r = result(run);
    expect(r).toMatchObject({
      subtype: "success",
      is_error: false,
      result: text,
      num_turns: 1,
      session_id: sessionId,
      permission_denials: [],
    });
    expect(r.usage).toMatchObject(usage);
    expect(r.total_cost_usd).toBeGreaterThan(0);
    const modelUsage = Object.values(r.modelUsage as Record<string, Record<string, number>>);
    expect(modelUsage).toHaveLength(1);
    expect(modelUsage[0]?.costUSD).toBe(r.total_cost_usd);
    expect(modelUsage[0]?.contextWindow).toBeGreaterThan(0);

    // Only main-conversation requests: no side requests, no other endpoints.
    expect(mock.requests.map((q) => `${q.method} ${q.path} ${q.kind}`)).toEqual([
      "POST /v1/messages main",
    ]);
    expect(userTexts(mock.mainRequests()[0] as MessagesBody)).toContain("Say hello");
  });

  it("streams thinking (thinking_delta + signature_delta) before the text", async () => {
    const { run } = await scenario(
      "thinking",
      [
        {
          blocks: [
            { type: "thinking", thinking: "The user wants a greeting. I will keep it short." },
            { type: "text", text: "Hi! How can I help you today?" },
          ],
        },
      ],
      BYPASS,
      "Say hello",
    );
    expect(
      deltas(run, "thinking_delta")
        .map((d) => d.thinking)
        .join(""),
    ).toBe("The user wants a greeting. I will keep it short.");
    expect(deltas(run, "signature_delta")).toHaveLength(1);
    // One `assistant` line per content block.
    const blocks = ofType(run, "assistant").map(
      (l) => (l.message as { content: Array<{ type: string }> }).content[0]?.type,
    );
    expect(blocks).toEqual(["thinking", "text"]);
    expect(ofType(run, "system", "thinking_tokens").length).toBeGreaterThan(0);
    expect(result(run).result).toBe("Hi! How can I help you today?");
  });

  it("runs a Bash tool for real and sends its tool_result in the next request", async () => {
    const { mock, run, ce } = await scenario(
      "bash",
      [
        {
          blocks: [
            { type: "text", text: "Let me run that." },
            {
              type: "tool_use",
              name: "Bash",
              id: "toolu_bash1",
              input: { command: "echo hi && echo from-bash > made.txt", description: "Print hi" },
            },
          ],
        },
        { blocks: [{ type: "text", text: "The command printed hi." }] },
      ],
      BYPASS,
      "Run echo hi",
    );
    expect(run.code).toBe(0);
    expect(await readFile(join(ce.cwd, "made.txt"), "utf8")).toBe("from-bash\n");
    const toolJson = deltas(run, "input_json_delta").map((d) => d.partial_json);
    expect(toolJson.length).toBeGreaterThan(1);
    expect(JSON.parse(toolJson.join(""))).toMatchObject({
      command: expect.stringContaining("echo"),
    });

    const reqs = mock.mainRequests();
    expect(reqs).toHaveLength(2);
    const last = reqs[1]?.messages.at(-1);
    expect(last?.role).toBe("user");
    expect(last?.content).toEqual([
      expect.objectContaining({ type: "tool_result", tool_use_id: "toolu_bash1", content: "hi" }),
    ]);
    const toolResults = ofType(run, "user");
    expect(toolResults).toHaveLength(1);
    expect(result(run)).toMatchObject({ num_turns: 2, result: "The command printed hi." });
  });

  it("asks can_use_tool for AskUserQuestion even when bypassing; a deny becomes a denial", async () => {
    const questions = QUESTIONS;
    const { run, mock } = await scenario(
      "ask-user-question-deny",
      [
        {
          blocks: [
            { type: "tool_use", name: "AskUserQuestion", id: "toolu_ask1", input: { questions } },
          ],
        },
        {
          blocks: [
            { type: "text", text: "Which approach do you prefer: A (rewrite) or B (patch)?" },
          ],
        },
      ],
      BYPASS,
      "Help me choose",
    );
    const reqs = ofType(run, "control_request");
    expect(reqs).toHaveLength(1);
    expect(reqs[0]?.request).toMatchObject({
      subtype: "can_use_tool",
      tool_name: "AskUserQuestion",
      tool_use_id: "toolu_ask1",
      requires_user_interaction: true,
      input: { questions },
    });
    const last = mock.mainRequests()[1]?.messages.at(-1);
    expect(last?.content).toEqual([
      expect.objectContaining({ type: "tool_result", is_error: true, content: "Denied by test" }),
    ]);
    expect(result(run).permission_denials).toEqual([
      { tool_name: "AskUserQuestion", tool_use_id: "toolu_ask1", tool_input: { questions } },
    ]);
  });

  it("an AskUserQuestion allowed with answers reads them back to the model", async () => {
    const questions = QUESTIONS;
    const { run } = await scenario(
      "ask-user-question-answer",
      [
        {
          blocks: [
            { type: "tool_use", name: "AskUserQuestion", id: "toolu_ask2", input: { questions } },
          ],
        },
        { blocks: [{ type: "text", text: "Going with B." }] },
      ],
      BYPASS,
      "Help me choose",
      {
        answer: (req) => ({
          behavior: "allow",
          updatedInput: { ...req.request.input, answers: { "Which approach?": "B" } },
        }),
      },
    );
    expect(toolResults(run)[0]?.content).toContain('"Which approach?"="B"');
    expect(result(run).permission_denials).toEqual([]);
  });

  it("acceptEdits runs a Bash command that only writes in cwd without asking", async () => {
    const { run, ce } = await scenario(
      "bash-accept-edits",
      [
        {
          blocks: [
            {
              type: "tool_use",
              name: "Bash",
              id: "toolu_bash1",
              input: { command: "echo hi > out.txt && echo done", description: "Write a file" },
            },
          ],
        },
        { blocks: [{ type: "text", text: "Finished." }] },
      ],
      ["--permission-mode", "acceptEdits"],
      "Write out.txt",
    );
    expect(ofType(run, "control_request")).toHaveLength(0);
    expect(existsSync(join(ce.cwd, "out.txt"))).toBe(true);
  });

  it("acceptEdits asks can_use_tool for other Bash commands", async () => {
    const { run } = await scenario(
      "bash-accept-edits-prompt",
      [
        {
          blocks: [
            {
              type: "tool_use",
              name: "Bash",
              id: "toolu_bash2",
              input: { command: "python3 -c \"print('x')\"", description: "Run python" },
            },
          ],
        },
        { blocks: [{ type: "text", text: "Finished." }] },
      ],
      ["--permission-mode", "acceptEdits"],
      "Run python",
    );
    const reqs = ofType(run, "control_request");
    expect(reqs).toHaveLength(1);
    expect(reqs[0]?.request).toMatchObject({ subtype: "can_use_tool", tool_name: "Bash" });
    expect(result(run).permission_denials).toHaveLength(1);
  });

  it("accepts --permission-mode default (hidden alias; help lists manual) and asks for Bash", async () => {
    for (const mode of ["default", "manual"]) {
      const { run, ce } = await scenario(
        mode === "default" ? "bash-default-mode" : null,
        [
          {
            blocks: [
              {
                type: "tool_use",
                name: "Bash",
                id: "toolu_bash3",
                input: { command: "echo hi > out.txt", description: "Write a file" },
              },
            ],
          },
          { blocks: [{ type: "text", text: "I could not write it." }] },
        ],
        ["--permission-mode", mode],
        "Write out.txt",
      );
      expect(run.code).toBe(0);
      expect(ofType(run, "system", "init")[0]?.permissionMode).toBe("default");
      expect(ofType(run, "control_request")).toHaveLength(1);
      expect(existsSync(join(ce.cwd, "out.txt"))).toBe(false);
    }
  });

  it("--dangerously-skip-permissions runs tools without asking (init says bypassPermissions)", async () => {
    const { run, ce } = await scenario(
      "bash-dangerously-skip-permissions",
      [
        {
          blocks: [
            {
              type: "tool_use",
              name: "Bash",
              id: "toolu_bash4",
              input: { command: "python3 -c \"open('py.txt','w').write('1')\" && echo ok" },
            },
          ],
        },
        { blocks: [{ type: "text", text: "Done." }] },
      ],
      ["--dangerously-skip-permissions"],
      "Run python",
    );
    expect(ofType(run, "system", "init")[0]?.permissionMode).toBe("bypassPermissions");
    expect(ofType(run, "control_request")).toHaveLength(0);
    expect(existsSync(join(ce.cwd, "py.txt"))).toBe(true);
  });

  it("an API 400 ends with a result that has is_error and exit code 1", async () => {
    const message = "mock failure: bad request";
    const { run, mock } = await scenario(
      "api-error-400",
      [{ error: { status: 400, type: "invalid_request_error", message } }],
      BYPASS,
      "Hello",
    );
    // The CLI retries a 400 five times, dropping beta headers, before giving up.
    expect(mock.mainRequests().length).toBe(6);
    const synthetic = ofType(run, "assistant");
    expect(synthetic).toHaveLength(1);
    expect(synthetic[0]).toMatchObject({ error: "unknown", api_error_status: 400 });
    expect(result(run)).toMatchObject({
      subtype: "success",
      is_error: true,
      api_error_status: 400,
      terminal_reason: "api_error",
      result: `API Error: 400 ${message}`,
      total_cost_usd: 0,
    });
    expect(run.code).toBe(1);
  });

  it("a 529 is retried (system api_retry) and the run then succeeds", async () => {
    const { run } = await scenario(
      "api-retry-529",
      [
        { error: { status: 529, type: "overloaded_error", message: "Overloaded" }, once: true },
        { blocks: [{ type: "text", text: "Recovered after retry." }] },
      ],
      BYPASS,
      "Hello",
    );
    expect(ofType(run, "system", "api_retry")[0]).toMatchObject({
      attempt: 1,
      error_status: 529,
      error: "overloaded",
    });
    expect(result(run)).toMatchObject({ is_error: false, result: "Recovered after retry." });
  });

  it("--resume sends the earlier turns; total_cost_usd then counts the whole session", async () => {
    const { mock, ce } = await setup();
    const sessionId = randomUUID();
    mock.script({ blocks: [{ type: "text", text: "Noted: the secret word is PAPAYA." }] });
    const first = await runCli(ce, { args: args(sessionId, ...BYPASS), prompt: "Remember PAPAYA" });
    save("resume-1", first);
    mock.script({ blocks: [{ type: "text", text: "You said PAPAYA." }] });
    const second = await runCli(ce, {
      args: [...BRIDGE_FLAGS, "--resume", sessionId, ...BYPASS],
      prompt: "What was the word?",
    });
    save("resume-2", second);
    expect(second.code).toBe(0);
    const req = mock.mainRequests()[1] as MessagesBody;
    const turns = req.messages.filter((m) => m.role !== "system");
    expect(turns.map((m) => m.role)).toEqual(["user", "assistant", "user"]);
    expect(JSON.stringify(turns[1]?.content)).toContain("Noted: the secret word is PAPAYA.");
    expect(userTexts(req)).toContain("What was the word?");
    const r1 = result(first);
    const r2 = result(second);
    expect(r2.session_id).toBe(sessionId);
    // usage is this run's; total_cost_usd and modelUsage are the resumed session's totals;
    // model_usage_since_last_result is this run's.
    expect(r2.usage).toMatchObject({ input_tokens: 100, output_tokens: 20 });
    expect(r2.total_cost_usd).toBeCloseTo(2 * (r1.total_cost_usd as number), 10);
    const since = Object.values(
      r2.model_usage_since_last_result as Record<string, { costUSD: number }>,
    );
    expect(since[0]?.costUSD).toBe(r1.total_cost_usd);
  });

  it("closing stdin early fails pending permission requests (tool_result: Stream closed)", async () => {
    const { run } = await scenario(
      "stdin-closed-early",
      [
        {
          blocks: [
            {
              type: "tool_use",
              name: "AskUserQuestion",
              id: "toolu_ask3",
              input: { questions: QUESTIONS },
            },
          ],
        },
      ],
      BYPASS,
      "Ask me",
      { closeStdin: "immediately" },
    );
    expect(ofType(run, "control_request")).toHaveLength(0);
    const tr = toolResults(run)[0];
    expect(tr).toMatchObject({ is_error: true, content: expect.stringContaining("Stream closed") });
    expect(result(run).is_error).toBe(false);
  });

  it("refuses bypass modes as root without IS_SANDBOX", async () => {
    if (process.getuid?.() !== 0) return;
    const { ce } = await setup();
    const { IS_SANDBOX: _, ...env } = ce.env;
    const run = await runCli({ ...ce, env }, { args: args(randomUUID(), ...BYPASS), prompt: "hi" });
    expect(run.code).toBe(1);
    expect(run.stdout).toBe("");
    expect(run.stderr).toContain("cannot be used with root/sudo privileges");
  });
});
