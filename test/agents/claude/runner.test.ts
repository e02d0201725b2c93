import { execFileSync } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { buildClaudeArgs, userMessageLine } from "../../../src/agents/claude/command.js";
import { ASK_DENY_MESSAGE } from "../../../src/agents/claude/control.js";
import {
  type RunnerConfig,
  type RunRequest,
  runClaude,
} from "../../../src/agents/claude/runner.js";
import type { BridgeEvent, CompletionEvent } from "../../../src/events.js";
import { createLogger } from "../../../src/log.js";
import { groupAlive } from "../../../src/process/groups.js";
import {
  type FakeClaude,
  type FakeScenario,
  fakeClaude,
  fakeRunnerConfig,
} from "../../support/fake-claude.js";
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

const fakes: FakeClaude[] = [];
afterEach(async () => {
  await Promise.all(fakes.splice(0).map((f) => f.cleanup()));
});

async function fake(scenario: FakeScenario): Promise<FakeClaude> {
  const f = await fakeClaude(scenario);
  fakes.push(f);
  return f;
}

function request(f: FakeClaude, overrides: Partial<RunRequest> = {}): RunRequest {
  return {
    prompt: "hello",
    claudeSessionId: SESSION_ID,
    resume: false,
    permissionMode: "default",
    cwd: f.dir,
    ...overrides,
  };
}

async function collect(gen: AsyncGenerator<BridgeEvent[]>): Promise<BridgeEvent[]> {
  const events: BridgeEvent[] = [];
  for await (const batch of gen) events.push(...batch);
  return events;
}

/** Asserts that the run ended with exactly one completion, last, and returns it. */
function completionOf(events: BridgeEvent[]): CompletionEvent {
  const completions = events.filter((e) => e.type === "completion");
  expect(completions).toHaveLength(1);
  const last = events.at(-1);
  if (last?.type !== "completion") throw new Error("last event is not the completion");
  return last;
}

async function run(
  scenario: FakeScenario,
  overrides: Partial<RunnerConfig> = {},
  req: Partial<RunRequest> = {},
) {
  const f = await fake(scenario);
  let pgid = 0;
  const config = fakeRunnerConfig(f, { onSpawn: (id) => (pgid = id), ...overrides });
  const started = performance.now();
  const events = await collect(runClaude(request(f, req), config));
  const ms = performance.now() - started;
  return { f, events, completion: completionOf(events), ms, pgid, record: await f.record() };
}

const texts = (events: BridgeEvent[]) =>
  events.flatMap((e) => (e.type === "text_delta" ? [e.text] : [])).join("");

/** Live (non-zombie) processes of a group, from ps: independent of the runner's own check. */
function survivors(pgid: number): string[] {
  // Group 0 holds the kernel's threads: a test that never learnt its group must not look there.
  if (pgid <= 0) throw new Error(`no process group to look at (${pgid})`);
  const out = execFileSync("ps", ["-eo", "pid=,pgid=,stat="], { encoding: "utf8" });
  return out
    .split("\n")
    .map((l) => l.trim().split(/\s+/))
    .filter(([, g, stat]) => Number(g) === pgid && stat !== undefined && !stat.startsWith("Z"))
    .map(([pid, , stat]) => `${pid} ${stat}`);
}

const ok = (text = "Done.") => [
  { emit: systemInit() },
  ...streamedText("msg_1", [text.slice(0, 2), text.slice(2)]).map((emit) => ({ emit })),
  { emit: result({ result: text }) },
];

describe("runClaude with the fake CLI", () => {
  it("maps a successful run and ends with the result's completion", async () => {
    const { events, completion } = await run({ steps: ok("Hello there") });
    expect(events.filter((e) => e.type === "text_delta").map((e) => e.text)).toEqual([
      "He",
      "llo there",
    ]);
    expect(completion).toMatchObject({
      status: "succeeded",
      is_error: false,
      result: "Hello there",
      error: null,
      cost_usd: 0.0123,
      duration_ms: 1234,
      usage: {
        input_tokens: 100,
        output_tokens: 20,
        cache_read_tokens: 7,
        cache_creation_tokens: 5,
        num_turns: 1,
        duration_api_ms: 1000,
      },
      claude_session_id: SESSION_ID,
      last_message_uuid: "a-msg_1",
    });
  });

  it("sends the prompt on stdin as exactly the user message line, never in argv, and closes stdin after the result", async () => {
    const prompt = "--dangerously-skip-permissions\n--help";
    const { record, completion } = await run({ steps: ok() }, {}, { prompt, model: "m1" });
    expect(completion.status).toBe("succeeded");
    expect(record.args).toEqual(
      buildClaudeArgs({ ...request({} as FakeClaude, { prompt, model: "m1" }) }),
    );
    expect(record.args.join(" ")).not.toContain("--dangerously-skip-permissions");
    expect(record.stdin).toEqual([userMessageLine(prompt).slice(0, -1)]);
    expect(record.stdinEnded).toBe(true);
  });

  it("reports the process group id through onSpawn", async () => {
    const f = await fake({ steps: ok() });
    const pgids: number[] = [];
    const events = await collect(
      runClaude(request(f), fakeRunnerConfig(f, { onSpawn: (pgid) => pgids.push(pgid) })),
    );
    expect(completionOf(events).status).toBe("succeeded");
    expect(pgids).toEqual([(await f.record()).pid]);
  });

  it("runs in the requested cwd with exactly the given environment", async () => {
    const f = await fake({ steps: ok() });
    const events = await collect(runClaude(request(f), fakeRunnerConfig(f)));
    expect(completionOf(events).status).toBe("succeeded");
    expect((await f.record()).cwd).toBe(f.dir);
  });

  describe("the error table", () => {
    it("binary missing -> failed, 'claude CLI not found', naming the setting, not the path", async () => {
      const f = await fake({ steps: [] });
      const bin = join(f.dir, "no-such-claude");
      const events = await collect(runClaude(request(f), fakeRunnerConfig(f, { bin })));
      expect(events).toHaveLength(1);
      expect(completionOf(events)).toMatchObject({
        status: "failed",
        is_error: true,
        error: "claude CLI not found (AGENT_BRIDGE_CLAUDE_BIN); the server's log names the path",
        usage: { input_tokens: 0, output_tokens: 0 },
        cost_usd: 0,
      });
    });

    it("missing working directory -> failed naming the directory, not the CLI", async () => {
      const f = await fake({ steps: [] });
      const cwd = join(f.dir, "gone");
      const events = await collect(runClaude(request(f, { cwd }), fakeRunnerConfig(f)));
      expect(completionOf(events)).toMatchObject({
        status: "failed",
        error: "the session's working directory does not exist",
      });
    });

    it("spawn error (binary not executable) -> failed, 'could not start claude CLI'", async () => {
      const dir = await mkdtemp(join(tmpdir(), "noexec-"));
      const bin = join(dir, "claude");
      await writeFile(bin, "#!/bin/sh\n", { mode: 0o644 });
      try {
        const f = await fake({ steps: [] });
        const completion = completionOf(
          await collect(runClaude(request(f), fakeRunnerConfig(f, { bin }))),
        );
        expect(completion.status).toBe("failed");
        expect(completion.error).toBe(
          "could not start claude CLI (EACCES); the server's log says why",
        );
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });

    it("exit N before any result -> failed, 'exited with code N' and the stderr tail", async () => {
      const { completion } = await run({
        steps: [{ emit: systemInit() }, { stderr: "Error: something broke\n" }, { exit: 3 }],
      });
      expect(completion.status).toBe("failed");
      expect(completion.error).toBe("claude CLI exited with code 3\nError: something broke");
      // What the CLI said before dying still counts.
      expect(completion.claude_session_id).toBe(SESSION_ID);
    });

    it("keeps only the last stderrTailBytes of stderr", async () => {
      const stderr = `${"noise ".repeat(1000)}THE END`;
      const { completion } = await run(
        { steps: [{ stderr }, { exit: 1 }] },
        { stderrTailBytes: 16 },
      );
      expect(completion.error).toBe(`claude CLI exited with code 1\n${stderr.slice(-16).trim()}`);
    });

    it("exit 0 without a result -> failed, 'ended before emitting a result'", async () => {
      const { completion } = await run({ steps: [{ emit: systemInit() }, { exit: 0 }] });
      expect(completion).toMatchObject({
        status: "failed",
        error: "claude CLI ended before emitting a result",
      });
    });

    it("a result with is_error -> one failed completion with the CLI's message", async () => {
      const { events, completion } = await run({
        steps: [
          { emit: systemInit() },
          {
            emit: result({ is_error: true, result: "API Error: 400 bad thing", total_cost_usd: 0 }),
          },
        ],
        exitCode: 1,
      });
      expect(completion).toMatchObject({
        status: "failed",
        is_error: true,
        error: "API Error: 400 bad thing",
      });
      expect(events.filter((e) => e.type === "completion")).toHaveLength(1);
    });

    it("non-zero exit after a result -> the run stands as the result says", async () => {
      const { completion } = await run({ steps: ok(), exitCode: 7 });
      expect(completion).toMatchObject({ status: "succeeded", error: null, result: "Done." });
    });

    it("a result written just before the process exits is still read", async () => {
      const { completion } = await run({ steps: [...ok(), { exit: 0 }] });
      expect(completion.status).toBe("succeeded");
    });

    it("wall-clock timeout -> timed_out, and the group is gone", async () => {
      // The fake never ends by itself: only the timer can have ended the run.
      const { completion, pgid } = await run(
        { steps: [{ emit: systemInit() }], end: "hang" },
        { timeoutMs: 300, idleTimeoutMs: 0 },
      );
      expect(completion).toMatchObject({
        status: "timed_out",
        error: "claude CLI timed out after 0.3s",
      });
      expect(survivors(pgid)).toEqual([]);
    });

    it("idle timeout -> failed with a stall message", async () => {
      const { completion, pgid } = await run(
        { steps: [{ emit: systemInit() }, { sleep: 50 }, { emit: systemInit() }], end: "hang" },
        { idleTimeoutMs: 250 },
      );
      expect(completion).toMatchObject({
        status: "failed",
        error: "claude CLI stalled: no output for 0.3s",
      });
      expect(survivors(pgid)).toEqual([]);
    });

    it("output keeps the idle timer from firing", async () => {
      // 3 s of ticks every 250 ms, against a 2 s idle limit (the fake's start-up counts too).
      const steps = Array.from({ length: 12 }, () => [{ sleep: 250 }, { stderr: "tick\n" }]).flat();
      const { completion } = await run({ steps: [...steps, ...ok()] }, { idleTimeoutMs: 2000 });
      expect(completion.status).toBe("succeeded");
    });

    it("cancel via AbortSignal -> cancelled, and the group is gone", async () => {
      const f = await fake({
        steps: [{ emit: systemInit() }, ...streamedText("m", ["a"]).map((emit) => ({ emit }))],
        end: "hang",
      });
      const controller = new AbortController();
      let pgid = 0;
      const config = fakeRunnerConfig(f, { onSpawn: (id) => (pgid = id) });
      const events: BridgeEvent[] = [];
      for await (const batch of runClaude(request(f), config, controller.signal)) {
        events.push(...batch);
        if (batch.some((e) => e.type === "text_delta")) controller.abort();
      }
      expect(completionOf(events)).toMatchObject({ status: "cancelled", error: "run cancelled" });
      expect(survivors(pgid)).toEqual([]);
    });

    it("an already aborted signal -> cancelled without starting the CLI", async () => {
      const f = await fake({ steps: ok() });
      const events = await collect(runClaude(request(f), fakeRunnerConfig(f), AbortSignal.abort()));
      expect(events).toEqual([
        expect.objectContaining({ type: "completion", status: "cancelled" }),
      ]);
      expect((await f.record()).pid).toBe(0);
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
  });

  describe("process group", () => {
    it("a grandchild holding stdout does not hold the run: done soon after the result, no survivor", async () => {
      const { completion, record, ms, pgid } = await run({
        steps: [{ emit: systemInit() }, { grandchild: { seconds: 120 } }, ...ok().slice(1)],
      });
      expect(completion.status).toBe("succeeded");
      expect(record.grandchildren).toHaveLength(1);
      // Long before the grandchild would have closed stdout.
      expect(ms).toBeLessThan(30_000);
      expect(survivors(pgid)).toEqual([]);
    });

    it("a grandchild that ignores SIGTERM gets SIGKILL after killGraceMs", async () => {
      const { completion, ms, pgid } = await run(
        { steps: [{ grandchild: { seconds: 120, ignoreSigterm: true } }, ...ok()] },
        { killGraceMs: 200 },
      );
      expect(completion.status).toBe("succeeded");
      expect(ms).toBeGreaterThanOrEqual(200);
      expect(survivors(pgid)).toEqual([]);
    });

    it("a CLI that does not exit after the result is terminated after the grace period", async () => {
      const { completion, record, pgid } = await run(
        { steps: ok(), end: "hang" },
        { killGraceMs: 2000 },
      );
      expect(completion.status).toBe("succeeded");
      expect(record.stdinEnded).toBe(true);
      expect(survivors(pgid)).toEqual([]);
    });

    describe("the completion comes as soon as the outcome is known; the kill goes on behind it", () => {
      // The fake ignores SIGTERM and then says so with its first text: from then on its group
      // lives until the runner's SIGKILL, a grace period after the SIGTERM.
      const ready = [
        { ignoreSigterm: true } as const,
        { emit: systemInit() },
        ...streamedText("m", ["ready"]).map((emit) => ({ emit })),
      ];

      /**
       * Runs to the generator's end (or, with `stopAtCompletion`, calls return() there), noting
       * whether the CLI's group was still alive when the completion arrived.
       */
      async function runWatchingTheGroup(
        scenario: FakeScenario,
        overrides: Partial<RunnerConfig>,
        opts: { cancelWhenReady?: boolean; stopAtCompletion?: boolean } = {},
      ) {
        const f = await fake(scenario);
        let pgid = 0;
        const config = fakeRunnerConfig(f, { onSpawn: (id) => (pgid = id), ...overrides });
        const controller = new AbortController();
        const events: BridgeEvent[] = [];
        let aliveAtCompletion: boolean | undefined;
        for await (const batch of runClaude(request(f), config, controller.signal)) {
          events.push(...batch);
          if (opts.cancelWhenReady && batch.some((e) => e.type === "text_delta"))
            controller.abort();
          if (batch.some((e) => e.type === "completion")) {
            aliveAtCompletion = await groupAlive(pgid);
            if (opts.stopAtCompletion) break;
          }
        }
        // The generator has ended: nothing of the group may be left.
        expect(survivors(pgid)).toEqual([]);
        const completion = completionOf(events);
        // The fake was ready (ignoring SIGTERM) before the run ended.
        expect(events.findIndex((e) => e.type === "text_delta")).toBeGreaterThanOrEqual(0);
        return { completion, aliveAtCompletion, record: await f.record() };
      }

      it("an idle timeout: the stall is reported at the idle mark, SIGKILL comes after it", async () => {
        const { completion, aliveAtCompletion, record } = await runWatchingTheGroup(
          { steps: ready, end: "hang" },
          { idleTimeoutMs: 2000, killGraceMs: 3000 },
        );
        expect(completion).toMatchObject({
          status: "failed",
          error: expect.stringMatching(/stalled/),
        });
        expect(aliveAtCompletion).toBe(true);
        expect(record.signals).toContain("SIGTERM");
      });

      it("a cancel: cancelled at once, the group killed behind it", async () => {
        const { completion, aliveAtCompletion, record } = await runWatchingTheGroup(
          { steps: ready, end: "hang" },
          { killGraceMs: 3000 },
          { cancelWhenReady: true },
        );
        expect(completion.status).toBe("cancelled");
        expect(aliveAtCompletion).toBe(true);
        expect(record.signals).toContain("SIGTERM");
      });

      it("a result line: the run succeeds at once; a CLI that stays is killed when the consumer stops (return())", async () => {
        const { completion, aliveAtCompletion, record } = await runWatchingTheGroup(
          { steps: [...ready, { emit: result({ result: "ready" }) }], end: "hang" },
          { killGraceMs: 1500 },
          { stopAtCompletion: true },
        );
        expect(completion.status).toBe("succeeded");
        expect(aliveAtCompletion).toBe(true);
        expect(record.stdinEnded).toBe(true);
        expect(record.signals).toContain("SIGTERM");
      });
    });

    it("a consumer that stops iterating early (return()) kills the group", async () => {
      const f = await fake({
        steps: [
          { emit: systemInit() },
          { grandchild: { seconds: 120 } },
          ...streamedText("m", ["a"]).map((emit) => ({ emit })),
        ],
        end: "hang",
      });
      let pgid = 0;
      const gen = runClaude(request(f), fakeRunnerConfig(f, { onSpawn: (id) => (pgid = id) }));
      const first = await gen.next();
      expect(first.value).toContainEqual(
        expect.objectContaining({ type: "text_delta", text: "a" }),
      );
      const done = await gen.return(undefined);
      expect(done.done).toBe(true);
      expect((await f.record()).grandchildren).toHaveLength(1);
      expect(survivors(pgid)).toEqual([]);
    });
  });

  describe("framing through the real pipe", () => {
    it("passes a 40 MB tool output as a tool_result cut to 16 384 characters", async () => {
      const { events, completion } = await run(
        { steps: [{ bigToolResult: 20 * 1024 * 1024 }, { emit: result() }] },
        { maxLineBytes: 64 * 1024 * 1024 },
      );
      expect(completion).toMatchObject({ status: "succeeded", last_message_uuid: "big-uuid" });
      expect(events.filter((e) => e.type !== "completion")).toEqual([
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

    it("skips garbage lines with a warning and a count; the run still succeeds", async () => {
      const logs: string[] = [];
      const logger = createLogger("debug", {}, (l) => logs.push(l));
      const { completion } = await run(
        {
          steps: [{ text: "garbage\n" }, { emit: systemInit() }, { text: "{not json\n" }, ...ok()],
        },
        { logger },
      );
      expect(completion.status).toBe("succeeded");
      const parsed = logs.map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(
        parsed.filter((l) => l.msg === "claude stdout line is not a JSON object; skipped"),
      ).toHaveLength(2);
      expect(parsed.find((l) => l.msg === "claude run finished")).toMatchObject({
        invalid_lines: 2,
      });
    });

    it("logs a failed run at warn with its error code, a succeeded one at info", async () => {
      const logs: string[] = [];
      const logger = createLogger("debug", {}, (l) => logs.push(l));
      await run({ steps: [{ emit: systemInit() }, { exit: 3 }] }, { logger });
      await run({ steps: [{ emit: systemInit() }, ...ok()] }, { logger });
      const finished = logs
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .filter((l) => l.msg === "claude run finished");
      expect(finished).toMatchObject([
        { level: "warn", status: "failed", error_code: "agent_exited" },
        { level: "info", status: "succeeded" },
      ]);
      expect(finished[1]).not.toHaveProperty("error_code");
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

    it("drops an over-long line, keeps going, and says so in the completion", async () => {
      const { events, completion } = await run(
        { steps: [{ bigToolResult: 5000 }, ...ok()] },
        { maxLineBytes: 4096 },
      );
      expect(completion).toMatchObject({ status: "succeeded", dropped_lines: 1 });
      expect(
        events
          .filter((e) => e.type === "text_delta")
          .map((e) => e.text)
          .join(""),
      ).toBe("Done.");
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
    const expected = Array.from({ length: n }, (_, i) => `${i},`).join("");
    expect(texts(events)).toBe(expected);
  });

  describe("control protocol", () => {
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
      expect(record.stdin).toHaveLength(2);
      expect(JSON.parse(record.stdin[1] ?? "")).toEqual({
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
      const response = JSON.parse(record.stdin[1] ?? "");
      expect(response.response.request_id).toBe("req-9");
      expect(response.response.response.behavior).toBe("deny");
      expect(response.response.response.message).toMatch(/non-interactively/);
    });
  });
});
