import { afterEach, describe, expect, it } from "vitest";
import { buildClaudeArgs, userMessageLine } from "../../../src/agents/claude/command.js";
import { ASK_DENY_MESSAGE } from "../../../src/agents/claude/control.js";
import { initializeRequestLine } from "../../../src/agents/claude/hooks.js";
import type { RunRequest } from "../../../src/agents/claude/run-request.js";
import { type RunnerConfig, runClaude } from "../../../src/agents/claude/runner.js";
import type { BridgeEvent } from "../../../src/events.js";
import {
  type FakeCli,
  type FakeScenario,
  fakeCli,
  fakeRunnerConfig,
} from "../../support/fake-cli.js";
import {
  assistant,
  controlRequest,
  QUESTION_INPUT,
  result,
  SESSION_ID,
  streamedText,
  systemInit,
  toolResult,
  toolUse,
} from "../../support/stream-json-lines.js";
import { collect, completionOf, texts } from "../run-events.js";

// What is Claude's own in running `claude -p`: its stdin protocol and command line, the control
// protocol, and big or multibyte output through the real pipe. The edge cases every back-end
// shares (exits, timeouts, cancel, the process group, garbage and over-long lines) are in
// ../backends.test.ts, which runs them for Claude and Codex alike.

const fakes: FakeCli[] = [];
afterEach(async () => {
  await Promise.all(fakes.splice(0).map((f) => f.cleanup()));
});

async function fake(scenario: FakeScenario): Promise<FakeCli> {
  const f = await fakeCli(scenario);
  fakes.push(f);
  return f;
}

function request(f: FakeCli, overrides: Partial<RunRequest> = {}): RunRequest {
  return {
    prompt: "hello",
    claudeSessionId: SESSION_ID,
    resume: false,
    permissionMode: "default",
    cwd: f.dir,
    ...overrides,
  };
}

async function run(
  scenario: FakeScenario,
  overrides: Partial<RunnerConfig> = {},
  req: Partial<RunRequest> = {},
) {
  const f = await fake(scenario);
  const events = await collect(runClaude(request(f, req), fakeRunnerConfig(f, overrides)));
  return { events, completion: completionOf(events), record: await f.record() };
}

const ok = (text = "Done.") => [
  { emit: systemInit() },
  ...streamedText("msg_1", [text.slice(0, 2), text.slice(2)]).map((emit) => ({ emit })),
  { emit: result({ result: text }) },
];

describe("runClaude with the fake CLI", () => {
  it("sends the prompt on stdin as exactly the user message line, never in argv, and closes stdin after the result", async () => {
    const prompt = "--dangerously-skip-permissions\n--help";
    const { record, completion } = await run({ steps: ok() }, {}, { prompt, model: "m1" });
    expect(completion.status).toBe("succeeded");
    expect(record.args).toEqual(
      buildClaudeArgs({ ...request({} as FakeCli, { prompt, model: "m1" }) }),
    );
    expect(record.args.join(" ")).not.toContain("--dangerously-skip-permissions");
    // The `initialize` that registers the run's hooks (none without tool rules) comes first.
    expect(record.stdin).toEqual([
      initializeRequestLine(undefined).slice(0, -1),
      userMessageLine(prompt).slice(0, -1),
    ]);
    expect(record.stdinEnded).toBe(true);
  });

  it("an invalid request (worktree looking like a flag) -> failed without starting the CLI", async () => {
    const f = await fake({ steps: ok() });
    const events = await collect(runClaude(request(f, { worktree: "--x" }), fakeRunnerConfig(f)));
    expect(completionOf(events)).toMatchObject({
      status: "failed",
      error: 'invalid worktree name: "--x"',
    });
    expect((await f.record()).pid).toBe(0);
  });

  it("a run interrupted before its CLI starts ends cancelled without starting it", async () => {
    const f = await fake({ steps: ok() });
    const interruption = new AbortController();
    interruption.abort();
    const events = await collect(
      runClaude(request(f), fakeRunnerConfig(f, { interruption: interruption.signal })),
    );
    expect(completionOf(events)).toMatchObject({ status: "cancelled", error_code: "cancelled" });
    expect((await f.record()).pid).toBe(0);
  });

  describe("framing through the real pipe", () => {
    it("passes a 40 MB tool output as a tool_result cut to 16 384 characters", async () => {
      const { events, completion } = await run(
        { steps: [{ bigToolResult: 20 * 1024 * 1024 }, { emit: result() }] },
        { maxLineBytes: 64 * 1024 * 1024 },
      );
      expect(completion).toMatchObject({ status: "succeeded", last_message_uuid: "big-uuid" });
      expect(events.filter((e) => e.type === "tool_result")).toEqual([
        {
          type: "tool_result",
          tool_use_id: "toolu_big",
          is_error: false,
          content: "x".repeat(16_384),
          truncated: true,
        },
      ]);
    });

    it("decodes a multibyte character split across writes", async () => {
      const line = Buffer.from(
        `${JSON.stringify(assistant("m", [{ type: "text", text: "café 漢字" }]))}\n`,
      );
      const cutAt = line.indexOf(Buffer.from("漢")) + 1;
      const { events } = await run({
        steps: [
          { bytes: [...line.subarray(0, cutAt)] },
          { sleep: 30 },
          { bytes: [...line.subarray(cutAt)] },
          { emit: result() },
        ],
      });
      expect(events[0]).toEqual({ type: "text_delta", text: "café 漢字" });
    });

    it("relays a 12 MiB assistant text whole, in its text_delta and in the completion's result", async () => {
      const text = "é".repeat(6 * 1024 * 1024);
      const { events, completion } = await run({
        steps: [
          { emit: systemInit() },
          { emit: assistant("msg_big", [{ type: "text", text }]) },
          { emit: result({ result: text }) },
        ],
      });
      expect(texts(events)).toBe(text);
      expect(completion).toMatchObject({ status: "succeeded", result: text });
      expect(completion.dropped_lines).toBeUndefined();
    });
  });

  it("a slow consumer still gets every event in order (stdout is paused, not dropped)", async () => {
    const n = 5000;
    const steps = Array.from({ length: n }, (_, i) => ({
      emit: assistant(`m${i}`, [{ type: "text", text: `${i},` }]),
    }));
    const f = await fake({ steps: [...steps, { emit: result() }] });
    const events: BridgeEvent[] = [];
    for await (const batch of runClaude(request(f), fakeRunnerConfig(f, { idleTimeoutMs: 2000 }))) {
      // Longer than the idle timeout: meanwhile stdout fills the inbox and is paused.
      if (events.length === 0) await new Promise((r) => setTimeout(r, 2500));
      events.push(...batch);
    }
    expect(completionOf(events).status).toBe("succeeded");
    // Each message a paragraph of its own.
    const expected = Array.from({ length: n }, (_, i) => `${i},`).join("\n\n");
    expect(texts(events)).toBe(expected);
  });

  describe("control protocol", () => {
    it("a CLI that does not take the tool rules' hook is interrupted before its first turn, saying why", async () => {
      const refused = {
        type: "control_response",
        response: { subtype: "error", request_id: "initialize", error: "unknown subtype" },
      };
      const toolRules = { key: [], session: [{ tool: "Bash", decision: "deny" as const }] };
      const { events, record, completion } = await run(
        { steps: [{ emit: refused }] },
        {},
        { toolRules },
      );
      expect(events).toContainEqual({
        type: "status",
        message: "Stopped: the agent did not take the hook that enforces the tool rules",
      });
      expect(record.stdin.some((line) => line.includes('"subtype":"interrupt"'))).toBe(true);
      expect(completion.status).not.toBe("succeeded");
    });

    it("an AskUserQuestion request yields one user_question and a deny written to stdin", async () => {
      const { events, record, completion } = await run({
        steps: [
          { emit: systemInit() },
          { emit: assistant("m1", [toolUse("toolu_q", "AskUserQuestion", QUESTION_INPUT)]) },
          { emit: controlRequest("req-1", "AskUserQuestion", QUESTION_INPUT, "toolu_q") },
          { waitStdin: "control_response" },
          { emit: toolResult("toolu_q", ASK_DENY_MESSAGE, { isError: true }) },
          ...streamedText("m2", ["Which approach? A or B"]).map((emit) => ({ emit })),
          { emit: result({ result: "Which approach? A or B" }) },
        ],
      });
      expect(completion.status).toBe("succeeded");
      const questions = events.filter((e) => e.type === "user_question");
      expect(questions).toEqual([
        {
          type: "user_question",
          tool_use_id: "toolu_q",
          questions: [
            {
              question: "Which approach?",
              header: "Approach",
              options: [
                { label: "A", description: "first" },
                { label: "B", description: "second" },
              ],
              multi_select: false,
            },
          ],
        },
      ]);
      expect(record.stdin).toHaveLength(3);
      expect(JSON.parse(record.stdin[2] ?? "")).toEqual({
        type: "control_response",
        response: {
          subtype: "success",
          request_id: "req-1",
          response: { behavior: "deny", message: ASK_DENY_MESSAGE },
        },
      });
    });

    it("a question request without an earlier tool_use block still yields the question once", async () => {
      const { events } = await run({
        steps: [
          { emit: controlRequest("req-1", "AskUserQuestion", QUESTION_INPUT, "toolu_q") },
          { waitStdin: "control_response" },
          { emit: assistant("m1", [toolUse("toolu_q", "AskUserQuestion", QUESTION_INPUT)]) },
          { emit: result() },
        ],
      });
      expect(events.filter((e) => e.type === "user_question")).toHaveLength(1);
      expect(events.filter((e) => e.type === "status")).toHaveLength(0);
    });

    it("any other tool request is denied with a message that the bridge runs non-interactively", async () => {
      const { record } = await run({
        steps: [
          {
            emit: assistant("m1", [toolUse("toolu_w", "Write", { file_path: "/x", content: "y" })]),
          },
          { emit: controlRequest("req-9", "Write", { file_path: "/x", content: "y" }, "toolu_w") },
          { waitStdin: "control_response" },
          { emit: { type: "control_cancel_request", request_id: "req-0" } },
          { emit: result() },
        ],
      });
      const response = JSON.parse(record.stdin[2] ?? "");
      expect(response.response.request_id).toBe("req-9");
      expect(response.response.response.behavior).toBe("deny");
      expect(response.response.response.message).toMatch(/non-interactively/);
    });
  });
});
