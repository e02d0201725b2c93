import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { AgentBackend, AgentRunRequest } from "../../src/agents/agent.js";
import { claudeBackend } from "../../src/agents/claude/backend.js";
import { codexBackend } from "../../src/agents/codex/backend.js";
import { codexPlugin } from "../../src/agents/codex/plugin.js";
import type { GatewayAccess } from "../../src/agents/gateway-access.js";
import type { AgentName } from "../../src/agents/registry.js";
import type { BridgeEvent, CompletionEvent } from "../../src/events.js";
import { createLogger, type Logger, silentLogger } from "../../src/log.js";
import type { DriverConfig } from "../../src/process/driver/driver-config.js";
import { groupAlive } from "../../src/process/groups.js";
import { GitRunner } from "../../src/worktrees/git.js";
import { type FakeCli, type FakeScenario, type FakeStep, fakeCli } from "../support/fake-cli.js";
import { SESSION_ID } from "../support/stream-json-lines.js";
import { collect, completionOf } from "./run-events.js";

// The runner-edge cases every agent back-end must get right, run for each back-end through its
// `AgentBackend.run` on the scripted fake CLI (which ignores argv, so it stands in for either):
// the table below says what each back-end's CLI prints; the cases are written once.

type Json = Record<string, unknown>;
type DriverLimits = Omit<DriverConfig, "logger" | "onSpawn">;

/**
 * codex runs through the model gateway only; the fake CLI makes no call, so the access each run
 * gets from it is never used: an address nothing listens on, and no calls to account for.
 */
const NO_CALLS_GATEWAY: GatewayAccess = {
  variable: "OPENAI_API_KEY",
  source: "OPENAI_API_KEY",
  open: async () => ({
    baseUrl: "http://127.0.0.1:9/openai",
    token: "unused",
    socket: "/nonexistent",
    close: () => {},
    recorded: async () => {},
    refusal: () => undefined,
    metered: async () => ({
      calls: 0,
      inputTokens: 0,
      outputTokens: 0,
      cacheReadTokens: 0,
      cacheCreationTokens: 0,
      costUsd: 0,
      pricedCalls: 0,
    }),
  }),
};

interface BackendCase {
  name: AgentName;
  binVariable: string;
  build(bin: string, env: Record<string, string>, driver: DriverLimits): AgentBackend;
  /** What the completion of a reply with the fake's default usage carries besides the text. */
  succeeded: Partial<CompletionEvent>;
  /** Its CLI can be asked to end its turn (`AgentBackend.interruptible`). */
  interruptible: boolean;
}

// What the fake CLI prints for each back-end is its dialect (test/support/fake-dialects.ts): the
// cases below are written in its agent steps, once.
const BACKENDS: BackendCase[] = [
  {
    name: "claude",
    binVariable: "AGENT_BRIDGE_CLAUDE_BIN",
    build: (bin, env, driver) => claudeBackend({ bin, env, driver, mcpServers: {} }),
    succeeded: {
      usage: {
        input_tokens: 100,
        output_tokens: 20,
        cache_read_tokens: 3,
        cache_creation_tokens: 2,
        num_turns: 1,
        duration_api_ms: 1000,
      },
      agent_session_id: SESSION_ID,
    },
    interruptible: true,
  },
  {
    name: "codex",
    binVariable: "AGENT_BRIDGE_CODEX_BIN",
    build: (bin, env, driver) =>
      codexBackend({
        bin,
        env,
        driver,
        prices: {},
        worktree: codexPlugin.worktree,
        gateway: NO_CALLS_GATEWAY,
      }),
    succeeded: {
      usage: {
        input_tokens: 100,
        output_tokens: 20,
        cache_read_tokens: 3,
        cache_creation_tokens: 2,
        num_turns: 1,
        duration_api_ms: 0,
      },
      // The thread the fake started.
      agent_session_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
    },
    interruptible: false,
  },
];

// The cases run concurrently (they mostly wait on processes and timers), each with fakes of its
// own; the fakes' files go when the file is done.
const fakes: FakeCli[] = [];
afterAll(async () => {
  await Promise.all(fakes.splice(0).map((f) => f.cleanup()));
});

async function fake(scenario: FakeScenario, dialect: AgentName): Promise<FakeCli> {
  const f = await fakeCli(scenario, dialect);
  fakes.push(f);
  return f;
}

const emit = (lines: Json[]): FakeStep[] => lines.map((line) => ({ emit: line }));

/** Live (non-zombie) processes of a group, from ps: independent of the driver's own check. */
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

const textDeltas = (events: BridgeEvent[]) => events.filter((e) => e.type === "text_delta");

/** A logger that keeps what it writes, and that as parsed JSON lines. */
function capturedLog() {
  const lines: string[] = [];
  const logger = createLogger("debug", {}, (l) => lines.push(l));
  const entries = () => lines.map((l) => JSON.parse(l) as Json);
  return { logger, entries };
}

describe.concurrent.each(BACKENDS)("the $name back-end on the fake CLI", (backend) => {
  const { name } = backend;
  const opening: FakeStep[] = [{ init: true }];
  const say = (text: string): FakeStep => ({ reply: { parts: [text] } });
  /** The CLI says `text` and reports its outcome. */
  const answer = (text = "Done."): FakeStep[] => [say(text), { succeed: {} }];
  /** The CLI starts, says `text`, and reports its outcome. */
  const reply = (text = "Done."): FakeStep[] => [...opening, ...answer(text)];
  /** The CLI starts and says `text`, without an outcome yet. */
  const started = (text = "working"): FakeStep[] => [...opening, say(text)];
  const inDialect = (scenario: FakeScenario) => fake(scenario, name);

  interface RunOptions {
    driver?: Partial<DriverLimits>;
    bin?: string;
    cwd?: string;
    logger?: Logger;
    signal?: AbortSignal;
    toolRules?: AgentRunRequest["toolRules"];
  }

  /** The back-end built on the fake, a request for it, and its run (not started). */
  function start(f: FakeCli, opts: RunOptions = {}) {
    const driver: DriverLimits = {
      timeoutMs: 20_000,
      idleTimeoutMs: 10_000,
      maxLineBytes: 16 * 1024 * 1024,
      stderrTailBytes: 4096,
      killGraceMs: 300,
      ...opts.driver,
    };
    const request: AgentRunRequest = {
      sessionId: SESSION_ID,
      agentSessionId: null,
      resume: false,
      resumeAt: null,
      prompt: "hello",
      settings: {
        permissionMode: "default",
        effort: "medium",
        model: null,
        systemPrompt: null,
        worktree: false,
        mcpServers: [],
        maxTurns: null,
        maxBudgetUsd: null,
        approvals: "deny",
        disallowedTools: [],
        toolRules: [],
        addDirs: [],
        requireCleanWorkDir: false,
      },
      attachments: [],
      messageSystemPrompt: null,
      outputSchema: null,
      usageBefore: async () => {
        throw new Error("a new session has no usage before");
      },
      maxBudgetUsd: null,
      cwd: opts.cwd ?? f.dir,
      git: new GitRunner({ env: {} }).forSession(null, opts.cwd ?? f.dir),
      allowedTools: [],
      toolRules: opts.toolRules ?? { key: [], session: [] },
    };
    const pgids: number[] = [];
    const context = {
      runId: randomUUID(),
      logger: opts.logger ?? silentLogger,
      onSpawn: (id: number) => pgids.push(id),
      approve: async () => ({ behavior: "deny" as const }),
      withdraw: () => {},
      awaiting: () => false,
      answersQuestions: false,
    };
    const gen = backend
      .build(opts.bin ?? f.bin, f.env, driver)
      .run(request, context, opts.signal ?? new AbortController().signal);
    return { gen, pgids, pgid: () => pgids[0] ?? 0 };
  }

  async function run(scenario: FakeScenario, opts: RunOptions = {}) {
    const f = await inDialect(scenario);
    const { gen, pgids, pgid } = start(f, opts);
    const events = await collect(gen);
    const record = await f.record();
    return { f, events, completion: completionOf(events), pgids, pgid: pgid(), record };
  }

  it("maps a successful run to its text and one succeeded completion with the text as result", async () => {
    const { f, events, completion, pgids, record } = await run({ steps: reply("Hello there") });
    expect(textDeltas(events)).toEqual([{ type: "text_delta", text: "Hello there" }]);
    expect(completion).toMatchObject({
      status: "succeeded",
      is_error: false,
      result: "Hello there",
      error: null,
      ...backend.succeeded,
    });
    // The CLI ran in the request's cwd, its process group reported once.
    expect(record.cwd).toBe(f.dir);
    expect(pgids).toEqual([record.pid]);
  });

  describe("a CLI that ends without its outcome", () => {
    it(`exit N -> failed, agent_exited, "${name} CLI exited with code N" and the stderr tail`, async () => {
      const { completion } = await run({
        steps: [...opening, { stderr: "Error: something broke\n" }, { exit: 3 }],
      });
      expect(completion).toMatchObject({
        status: "failed",
        is_error: true,
        error_code: "agent_exited",
        error: `${name} CLI exited with code 3\nError: something broke`,
        // What the CLI said before it died still counts.
        agent_session_id: backend.succeeded.agent_session_id,
      });
    });

    it("keeps only the last stderrTailBytes of stderr", async () => {
      const stderr = `${"noise ".repeat(1000)}THE END`;
      const { completion } = await run(
        { steps: [{ stderr }, { exit: 1 }] },
        { driver: { stderrTailBytes: 16 } },
      );
      expect(completion.error).toBe(`${name} CLI exited with code 1\n${stderr.slice(-16).trim()}`);
    });

    it(`exit 0 -> failed, "${name} CLI ended before emitting a result"`, async () => {
      const { completion } = await run({ steps: [...opening, { exit: 0 }] });
      expect(completion).toMatchObject({
        status: "failed",
        error_code: "agent_exited",
        error: `${name} CLI ended before emitting a result`,
      });
    });
  });

  describe("the CLI's own outcome decides", () => {
    it("a failed outcome -> one failed completion with the CLI's message", async () => {
      const { completion } = await run({
        steps: [...opening, { fail: "API Error: 400 bad thing" }],
        exitCode: 1,
      });
      expect(completion).toMatchObject({
        status: "failed",
        is_error: true,
        error_code: "agent_error",
        error: "API Error: 400 bad thing",
      });
    });

    it("a non-zero exit after the outcome leaves the run as the outcome says", async () => {
      const { completion } = await run({ steps: reply(), exitCode: 7 });
      expect(completion).toMatchObject({ status: "succeeded", error: null, result: "Done." });
    });

    it("an outcome written just before the process exits is still read", async () => {
      const { completion } = await run({ steps: [...reply(), { exit: 0 }] });
      expect(completion).toMatchObject({ status: "succeeded", result: "Done." });
    });
  });

  describe("what cannot be started", () => {
    it("a run under its key's tool rules: claude runs it (its hook enforces them), codex fails it unstarted", async () => {
      const toolRules = { key: [{ tool: "Bash", decision: "deny" as const }], session: [] };
      const { completion, record } = await run({ steps: reply() }, { toolRules });
      if (name === "claude") {
        expect(completion.status).toBe("succeeded");
        expect(JSON.parse(record.stdin[0] ?? "").request.hooks).toEqual({
          PreToolUse: [{ hookCallbackIds: ["tool_rules"] }],
        });
      } else {
        expect(completion).toMatchObject({
          status: "failed",
          error_code: "invalid_run_request",
          error: "the key's policy has tool_rules, which codex exec has no hooks to enforce",
        });
        expect(record.pid).toBe(0);
      }
    });

    it(`the binary missing -> failed, agent_not_found, naming ${backend.binVariable}, not the path`, async () => {
      const f = await inDialect({ steps: [] });
      const bin = join(f.dir, "no-such-cli");
      const events = await collect(start(f, { bin }).gen);
      expect(events).toHaveLength(1);
      const completion = completionOf(events);
      expect(completion).toMatchObject({
        status: "failed",
        is_error: true,
        error_code: "agent_not_found",
        error: `${name} CLI not found (${backend.binVariable}); the server's log names the path`,
      });
      expect(completion.error).not.toContain(f.dir);
    });

    it("a missing working directory -> failed naming the directory, not the CLI", async () => {
      const f = await inDialect({ steps: [] });
      const events = await collect(start(f, { cwd: join(f.dir, "gone") }).gen);
      expect(completionOf(events)).toMatchObject({
        status: "failed",
        error_code: "work_dir_not_found",
        error: "the session's working directory does not exist",
      });
    });

    it(`a binary that is not executable -> failed, "could not start ${name} CLI"`, async () => {
      const dir = await mkdtemp(join(tmpdir(), "noexec-"));
      const bin = join(dir, name);
      await writeFile(bin, "#!/bin/sh\n", { mode: 0o644 });
      try {
        const f = await inDialect({ steps: [] });
        const completion = completionOf(await collect(start(f, { bin }).gen));
        expect(completion).toMatchObject({
          status: "failed",
          error_code: "agent_start_failed",
          error: `could not start ${name} CLI (EACCES); the server's log says why`,
        });
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });
  });

  describe("output framing", () => {
    it("skips garbage (non-JSON) lines with a warning and a count; the run still succeeds", async () => {
      const log = capturedLog();
      const { completion } = await run(
        {
          steps: [{ text: "garbage\n" }, ...opening, { text: "{not json\n" }, ...answer()],
        },
        { logger: log.logger },
      );
      expect(completion).toMatchObject({ status: "succeeded", result: "Done." });
      expect(completion.dropped_lines).toBeUndefined();
      const entries = log.entries();
      expect(
        entries.filter((l) => l.msg === `${name} stdout line is not a JSON object; skipped`),
      ).toHaveLength(2);
      expect(entries.find((l) => l.msg === `${name} run finished`)).toMatchObject({
        invalid_lines: 2,
      });
    });

    it("drops an over-long line, keeps going, and counts it in dropped_lines", async () => {
      const { events, completion } = await run(
        { steps: [...emit([{ type: "noise", pad: "x".repeat(5000) }]), ...reply()] },
        { driver: { maxLineBytes: 4096 } },
      );
      expect(completion).toMatchObject({ status: "succeeded", result: "Done.", dropped_lines: 1 });
      expect(textDeltas(events)).toEqual([{ type: "text_delta", text: "Done." }]);
    });
  });

  describe("the process group", () => {
    it("a grandchild holding stdout and ignoring SIGTERM does not hold the run; no process of the group survives", async () => {
      // The grandchild would keep stdout open for an hour: the run ends on the outcome instead.
      const { completion, record, pgid } = await run({
        steps: [...opening, { grandchild: { seconds: 3600, ignoreSigterm: true } }, ...answer()],
      });
      expect(completion.status).toBe("succeeded");
      expect(record.grandchildren).toHaveLength(1);
      expect(survivors(pgid)).toEqual([]);
    });

    it("a CLI that stays after its outcome and ignores SIGTERM gets SIGKILL after killGraceMs", async () => {
      const log = capturedLog();
      const killGraceMs = 200;
      const { completion, record, pgid } = await run(
        { steps: [{ ignoreSigterm: true }, ...reply()], end: "hang" },
        { driver: { killGraceMs }, logger: log.logger },
      );
      expect(completion.status).toBe("succeeded");
      expect(record.signals).toContain("SIGTERM");
      expect(survivors(pgid)).toEqual([]);
      const finished = log.entries().find((l) => l.msg === `${name} run finished`);
      expect(finished).toMatchObject({ exit_signal: "SIGKILL" });
      // The CLI had the grace period to exit by itself, then another after the SIGTERM.
      expect(finished?.stop_ms).toBeGreaterThanOrEqual(2 * killGraceMs);
    });

    it("a consumer that stops early (return()) kills the group", async () => {
      const f = await inDialect({
        steps: [...opening, { grandchild: { seconds: 3600 } }, say("a")],
        end: "hang",
      });
      const { gen, pgid } = start(f);
      // The opening's session events come first, in the same batch or before it.
      let batch = await gen.next();
      while (!batch.done && !batch.value.some((e) => e.type === "text_delta")) {
        batch = await gen.next();
      }
      expect(batch.value).toContainEqual({ type: "text_delta", text: "a" });
      const done = await gen.return(undefined);
      expect(done.done).toBe(true);
      expect((await f.record()).grandchildren).toHaveLength(1);
      expect(survivors(pgid())).toEqual([]);
    });
  });

  describe("timers", () => {
    it("wall-clock timeout -> timed_out, and the group is gone", async () => {
      // The fake never ends by itself: only the timer can have ended the run.
      const { completion, pgid } = await run(
        { steps: started(), end: "hang" },
        { driver: { timeoutMs: 300, idleTimeoutMs: 0 } },
      );
      expect(completion).toMatchObject({
        status: "timed_out",
        error_code: "timed_out",
        error: `${name} CLI timed out after 0.3s`,
      });
      expect(survivors(pgid)).toEqual([]);
    });

    it("idle timeout -> failed, agent_stalled, and the group is gone", async () => {
      const { completion, pgid } = await run(
        { steps: started(), end: "hang" },
        { driver: { idleTimeoutMs: 250 } },
      );
      expect(completion).toMatchObject({
        status: "failed",
        error_code: "agent_stalled",
        error: `${name} CLI stalled: no output for 0.3s`,
      });
      expect(survivors(pgid)).toEqual([]);
    });

    /** The control requests the fake read on its stdin, but the `initialize` every run starts with. */
    const controlRequests = (record: { stdin: string[] }) =>
      record.stdin
        .map((line) => JSON.parse(line) as Json)
        .filter((line) => line.type === "control_request")
        .map((line) => line.request)
        .filter((request) => (request as Json).subtype !== "initialize");

    // The fake ignores SIGTERM (and says so in its record), so only its own exit can end it
    // without a SIGTERM recorded; it has streamed a message's tokens before the limit (limits
    // long enough for that on a loaded machine, where the fake took over 0.3 s to its first line).
    it.runIf(backend.interruptible).each([
      {
        limit: "wall-clock timeout",
        driver: { timeoutMs: 2000, idleTimeoutMs: 0 },
        ended: {
          status: "timed_out",
          error_code: "timed_out",
          error: `${name} CLI timed out after 2s`,
        },
      },
      {
        limit: "stall",
        driver: { idleTimeoutMs: 1500 },
        ended: {
          status: "failed",
          error_code: "agent_stalled",
          error: `${name} CLI stalled: no output for 1.5s`,
        },
      },
    ])(
      "$limit: the CLI is asked to end its turn, and the run ends so with the cost and usage its result reported; the CLI exits by itself",
      async ({ driver, ended }) => {
        const { completion, record, pgid } = await run(
          { steps: [{ ignoreSigterm: true }, ...started()], end: "hang", interruptedCostUsd: 0.25 },
          { driver },
        );
        expect(completion).toMatchObject({
          ...ended,
          is_error: true,
          cost_usd: 0.25,
          // The interrupted result reports no tokens; the message's count then.
          usage: { input_tokens: 100 },
        });
        expect(controlRequests(record)).toEqual([{ subtype: "interrupt" }]);
        expect(record.signals).toEqual([]);
        expect(survivors(pgid)).toEqual([]);
      },
    );

    it.runIf(backend.interruptible)(
      "wall-clock timeout: a CLI that ignores the interrupt is killed once killGraceMs has passed, timed_out without a cost",
      async () => {
        const log = capturedLog();
        const timeoutMs = 300;
        const killGraceMs = 300;
        const { completion, record, pgid } = await run(
          { steps: [{ ignoreSigterm: true }, ...started()], end: "hang", ignoreInterrupt: true },
          { driver: { timeoutMs, idleTimeoutMs: 0, killGraceMs }, logger: log.logger },
        );
        // Killed, it reported no cost: the tokens its message streamed count, the cost is unknown.
        expect(completion).toMatchObject({
          status: "timed_out",
          error_code: "timed_out",
          cost_usd: null,
          usage: { input_tokens: 100 },
        });
        expect(controlRequests(record)).toEqual([{ subtype: "interrupt" }]);
        expect(record.signals).toContain("SIGTERM");
        expect(survivors(pgid)).toEqual([]);
        const finished = log.entries().find((l) => l.msg === `${name} run finished`);
        expect(finished).toMatchObject({ status: "timed_out", exit_signal: "SIGKILL" });
        // The outcome came once the grace for the CLI's answer had passed.
        expect(finished?.duration_ms).toBeGreaterThanOrEqual(timeoutMs + killGraceMs);
      },
    );

    it("output keeps the idle timer from firing", async () => {
      // 3 s of ticks every 250 ms, against a 2 s idle limit (the fake's start-up counts too).
      const ticks = Array.from({ length: 12 }, () => [{ sleep: 250 }, { stderr: "tick\n" }]).flat();
      const { completion } = await run(
        { steps: [...ticks, ...reply()] },
        { driver: { idleTimeoutMs: 2000 } },
      );
      expect(completion.status).toBe("succeeded");
    });
  });

  describe("cancel", () => {
    it("cancel via the AbortSignal -> cancelled, and the group is gone", async () => {
      const f = await inDialect({ steps: started(), end: "hang" });
      const controller = new AbortController();
      const { gen, pgid } = start(f, { signal: controller.signal });
      const events: BridgeEvent[] = [];
      for await (const batch of gen) {
        events.push(...batch);
        if (batch.some((e) => e.type === "text_delta")) controller.abort();
      }
      expect(completionOf(events)).toMatchObject({
        status: "cancelled",
        error_code: "cancelled",
        error: "run cancelled",
      });
      expect(survivors(pgid())).toEqual([]);
    });

    it("an aborted signal -> cancelled without starting the CLI", async () => {
      const f = await inDialect({ steps: reply() });
      const { gen, pgids } = start(f, { signal: AbortSignal.abort() });
      const events = await collect(gen);
      expect(events).toEqual([
        expect.objectContaining({ type: "completion", status: "cancelled" }),
      ]);
      expect(pgids).toEqual([]);
      expect((await f.record()).pid).toBe(0);
    });
  });

  describe("the completion comes as soon as the outcome is known; the kill goes on behind it", () => {
    // The fake ignores SIGTERM and then says so with its first text: from then on its group
    // lives until the driver's SIGKILL, a grace period after the SIGTERM.
    const ready: FakeStep[] = [{ ignoreSigterm: true }, ...started("ready")];

    /**
     * Runs to the generator's end (or, with `stopAtCompletion`, calls return() there), noting
     * whether the CLI's group was still alive when the completion arrived.
     */
    async function runWatchingTheGroup(
      scenario: FakeScenario,
      driver: Partial<DriverLimits>,
      opts: { cancelWhenReady?: boolean; stopAtCompletion?: boolean } = {},
    ) {
      const f = await inDialect(scenario);
      const controller = new AbortController();
      const { gen, pgid } = start(f, { driver, signal: controller.signal });
      const events: BridgeEvent[] = [];
      let aliveAtCompletion: boolean | undefined;
      for await (const batch of gen) {
        events.push(...batch);
        if (opts.cancelWhenReady && batch.some((e) => e.type === "text_delta")) controller.abort();
        if (batch.some((e) => e.type === "completion")) {
          aliveAtCompletion = await groupAlive(pgid());
          if (opts.stopAtCompletion) break;
        }
      }
      // The generator has ended: nothing of the group may be left.
      expect(survivors(pgid())).toEqual([]);
      const completion = completionOf(events);
      // The fake was ready (ignoring SIGTERM) before the run ended.
      expect(events.findIndex((e) => e.type === "text_delta")).toBeGreaterThanOrEqual(0);
      return { completion, aliveAtCompletion, record: await f.record() };
    }

    it("an idle timeout: the stall is reported once the CLI was asked to end its turn (and ignored it), SIGKILL comes after it", async () => {
      const { completion, aliveAtCompletion, record } = await runWatchingTheGroup(
        { steps: ready, end: "hang", ignoreInterrupt: true },
        { idleTimeoutMs: 2000, killGraceMs: 3000 },
      );
      expect(completion).toMatchObject({ status: "failed", error_code: "agent_stalled" });
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

    it("an outcome: the run succeeds at once; a CLI that stays is killed when the consumer stops (return())", async () => {
      const { completion, aliveAtCompletion, record } = await runWatchingTheGroup(
        { steps: [...ready, { succeed: {} }], end: "hang" },
        { killGraceMs: 1500 },
        { stopAtCompletion: true },
      );
      expect(completion).toMatchObject({ status: "succeeded", result: "ready" });
      expect(aliveAtCompletion).toBe(true);
      expect(record.stdinEnded).toBe(true);
      expect(record.signals).toContain("SIGTERM");
    });
  });

  it("logs a failed run at warn with its error code, a succeeded one at info", async () => {
    const log = capturedLog();
    await run({ steps: [...opening, { exit: 3 }] }, { logger: log.logger });
    await run({ steps: reply() }, { logger: log.logger });
    const finished = log.entries().filter((l) => l.msg === `${name} run finished`);
    expect(finished).toMatchObject([
      { level: "warn", status: "failed", error_code: "agent_exited" },
      { level: "info", status: "succeeded" },
    ]);
    expect(finished[1]).not.toHaveProperty("error_code");
  });
});
