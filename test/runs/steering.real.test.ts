import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ConversationItem, createClient } from "../../src/client/index.js";
import { cli } from "../cli/run-cli.js";
import { createTestApp, createTestAppOn, listen, type TestApp } from "../support/app.js";
import { type ClaudeEnv, makeClaudeEnv } from "../support/claude-env.js";
import { REAL_CLI_BACKENDS } from "../support/db.js";
import {
  holdUntilReleased,
  type MockAnthropic,
  startMockAnthropic,
} from "../support/mock-anthropic.js";
import { type RealClaudeApp, realClaudeApp } from "../support/real-claude.js";
import { SseReader } from "../support/sse.js";

// Steering a live run with the real `claude` CLI against the mock Messages API: an input written
// while a turn runs is answered after it, in the same run (src/agents/claude/steering.ts says what
// the CLI does), and a switch of model reaches the next API request.

type Json = Record<string, unknown>;

/** The API of a served app, as these tests call it. */
function calls(url: string) {
  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${url}${path}`, {
      method: "POST",
      headers: { "Content-Type": "application/json", ...headers },
      body: JSON.stringify(body),
    });
  return {
    post,
    session: async (body: Json = {}) =>
      ((await (await post("/v1/sessions", body)).json()) as { id: string }).id,
    /** Starts a run (202), its id. */
    start: async (sessionId: string, text: string) => {
      const res = await post(
        `/v1/sessions/${sessionId}/messages`,
        { text },
        { Prefer: "respond-async" },
      );
      expect(res.status).toBe(202);
      return ((await res.json()) as { id: string }).id;
    },
    /** The run's events (`?events=full`) up to its completion. */
    events: async (runId: string) =>
      SseReader.of(await fetch(`${url}/v1/runs/${runId}/events?events=full`)).events(),
  };
}

describe.each(REAL_CLI_BACKENDS)(
  "steering a live run with the real claude CLI on %s",
  (backend) => {
    let app: RealClaudeApp;
    let api: ReturnType<typeof calls>;

    beforeAll(async () => {
      app = await realClaudeApp(backend);
      api = calls(app.server.url);
    });
    afterAll(async () => {
      await app.close();
    });

    it("an input written during a turn is answered after it, in the same run, which ends after the second result with one completion covering both turns", async () => {
      const held = holdUntilReleased();
      app.mock.script(
        {
          blocks: [{ type: "text", text: "First answer." }],
          hold: held.hold,
          usage: { input_tokens: 100, output_tokens: 10 },
        },
        {
          blocks: [{ type: "text", text: "Steered answer." }],
          usage: { input_tokens: 200, output_tokens: 20 },
        },
      );
      const sessionId = await api.session();
      const runId = await api.start(sessionId, "say something");
      await held.arrived;
      const before = app.mock.mainRequests().length;

      // As the client sends it.
      const client = createClient({ baseUrl: app.server.url });
      const accepted = await client.sendInput(runId, { text: "now say it in French" });
      expect(accepted).toMatchObject({ type: "user_input", text: "now say it in French" });
      held.release();

      const frames = await api.events(runId);
      const completions = frames.filter((f) => f.event === "completion");
      expect(completions).toHaveLength(1);
      expect(completions[0]?.data).toMatchObject({
        status: "succeeded",
        result: "Steered answer.",
        usage: { input_tokens: 300, output_tokens: 30, num_turns: 2 },
      });
      expect(frames.find((f) => f.event === "user_input")?.data).toEqual(accepted);
      const second = app.mock.mainRequests()[before];
      expect(JSON.stringify(second?.messages.at(-1))).toContain("now say it in French");
      // The input is shown in the default view too.
      const shown = await SseReader.of(
        await fetch(`${app.server.url}/v1/runs/${runId}/events`),
      ).events();
      expect(shown.map((f) => f.event)).toContain("user_input");

      // Over now: an input is refused, not written to a CLI that is gone.
      const late = await api.post(`/v1/runs/${runId}/input`, { text: "and again" });
      expect(late.status).toBe(409);
      expect(await late.json()).toMatchObject({ code: "run_finished" });
    });

    it("a control set_model is answered while a tool runs, and the next API request names the new model", async () => {
      const held = holdUntilReleased();
      app.mock.script(
        {
          blocks: [{ type: "tool_use", name: "Bash", input: { command: "echo hi" } }],
          hold: held.hold,
        },
        { blocks: [{ type: "text", text: "Done." }] },
      );
      const sessionId = await api.session({ model: "claude-sonnet-4-5" });
      const runId = await api.start(sessionId, "run echo");
      await held.arrived;
      const before = app.mock.mainRequests().length;

      const res = await api.post(`/v1/runs/${runId}/control`, { model: "claude-haiku-4-5" });
      expect(res.status).toBe(200);
      const event = (await res.json()) as { type: string; model: string };
      expect(event).toMatchObject({ type: "control", model: expect.any(String) });
      held.release();

      const frames = await api.events(runId);
      expect(frames.find((f) => f.event === "control")?.data).toEqual(event);
      expect(frames.at(-1)?.data).toMatchObject({ status: "succeeded", result: "Done." });
      expect(app.mock.mainRequests()[before - 1]?.model).toBe("claude-sonnet-4-5");
      expect(app.mock.mainRequests()[before]?.model).toBe(event.model);
      // The CLI's own note of the switch is not the agent's text.
      const text = frames.filter((f) => f.event === "text_delta").map((f) => (f.data as Json).text);
      expect(text.join("")).toBe("Done.");
    });

    it("steered from the client (controlRun) and the command line (runs control, runs input), the run's conversation has the switches and the input between its two turns' texts, as sessions show --messages prints them", async () => {
      const held = holdUntilReleased();
      app.mock.script(
        {
          blocks: [
            { type: "text", text: "Looking." },
            { type: "tool_use", name: "Bash", input: { command: "echo hi" } },
          ],
        },
        // The first turn's last answer, held until the run has been steered.
        { blocks: [{ type: "text", text: "First answer." }], hold: held.hold },
        { blocks: [{ type: "text", text: "Steered answer." }] },
      );
      const client = createClient({ baseUrl: app.server.url });
      const session = await client.createSession({ model: "claude-sonnet-4-5" });
      const runId = await api.start(session.id, "run echo");
      const log = SseReader.of(
        await fetch(`${app.server.url}/v1/runs/${runId}/events?events=full`),
      );
      const started = await log.until("tool_result");
      await held.arrived;
      const before = app.mock.mainRequests().length;

      const switched = await client.controlRun(runId, { model: "claude-haiku-4-5" });
      expect(switched).toMatchObject({ type: "control", model: expect.any(String) });
      const mode = await cli(
        "--url",
        app.server.url,
        "runs",
        "control",
        runId,
        "--permission-mode",
        "acceptEdits",
      );
      expect(mode).toMatchObject({ code: 0, stdout: `permission_mode acceptEdits ${runId}\n` });
      const typed = await cli("--url", app.server.url, "runs", "input", runId, "and briefly");
      expect(typed.code).toBe(0);
      expect(typed.stdout).toMatch(new RegExp(`^input [0-9a-f-]{36} ${runId}\n$`));
      held.release();
      const frames = [...started, ...(await log.until("completion"))];
      await log.cancel();
      expect(frames.at(-1)?.data).toMatchObject({ status: "succeeded", result: "Steered answer." });
      const next = app.mock.mainRequests()[before];
      expect(next?.model).toBe(switched.model);
      expect(JSON.stringify(next?.messages.at(-1))).toContain("and briefly");

      const items: ConversationItem[] = [];
      for await (const item of client.messages(session.id)) items.push(item);
      const seqOf = (type: string, after = 0) =>
        Number(frames.find((f) => f.event === type && Number(f.id) > after)?.id);
      const of = { run_id: runId, live: false };
      const inputId = typed.stdout.split(" ")[1];
      expect(items).toEqual([
        expect.objectContaining({ type: "user_message", ...of, text: "run echo" }),
        { type: "assistant_text", ...of, seq: seqOf("text_delta"), text: "Looking." },
        expect.objectContaining({ type: "tool_call", ...of, tool_name: "Bash" }),
        {
          type: "control",
          ...of,
          seq: seqOf("control"),
          control_id: switched.control_id,
          model: switched.model,
          permission_mode: null,
        },
        {
          type: "control",
          ...of,
          seq: seqOf("control", seqOf("control")),
          control_id: expect.any(String),
          model: null,
          permission_mode: "acceptEdits",
        },
        {
          type: "user_input",
          ...of,
          seq: seqOf("user_input"),
          input_id: inputId,
          text: "and briefly",
          image_count: 0,
        },
        // A new text after the input. It holds the first turn's last words (answered after the
        // input was sent) and then the second turn's, a new paragraph as a later message is.
        {
          type: "assistant_text",
          ...of,
          seq: seqOf("text_delta", seqOf("user_input")),
          text: "\n\nFirst answer.\n\nSteered answer.",
        },
        expect.objectContaining({ type: "run_end", ...of, status: "succeeded" }),
      ]);
      const shown = await cli(
        "--url",
        app.server.url,
        "sessions",
        "show",
        session.id,
        "--messages",
      );
      expect(shown.code).toBe(0);
      expect(shown.stdout.split("\n").slice(1)).toEqual([
        "> run echo",
        "Looking.",
        '• Bash (shell_exec) {"command":"echo hi"}',
        "  ok: hi",
        `⇄ switched to model ${switched.model}`,
        "⇄ switched to permission mode acceptEdits",
        "> and briefly",
        "First answer.",
        "",
        "Steered answer.",
        expect.stringMatching(/^■ succeeded · /),
        "",
      ]);
    });

    it("a switch the CLI refuses (a bypass mode in a run not started in one) is a 409 control_failed, recorded nowhere", async () => {
      const held = holdUntilReleased();
      app.mock.script({ blocks: [{ type: "text", text: "Fine." }], hold: held.hold });
      const sessionId = await api.session({ permission_mode: "default" });
      const runId = await api.start(sessionId, "hello");
      await held.arrived;
      const res = await api.post(`/v1/runs/${runId}/control`, {
        permission_mode: "bypassPermissions",
      });
      expect(res.status).toBe(409);
      expect(await res.json()).toMatchObject({ code: "control_failed" });
      held.release();
      const frames = await api.events(runId);
      expect(frames.map((f) => f.event)).not.toContain("control");
      expect(frames.at(-1)?.data).toMatchObject({ status: "succeeded" });
    });

    it("unfit input is a 400 naming the field, and changes nothing", async () => {
      const held = holdUntilReleased();
      app.mock.script({ blocks: [{ type: "text", text: "Fine." }], hold: held.hold });
      const runId = await api.start(await api.session(), "hello");
      await held.arrived;
      for (const body of [{ text: "a\u0000b" }, { text: "\ud800" }, { text: "" }, {}]) {
        const res = await api.post(`/v1/runs/${runId}/input`, body);
        expect(res.status).toBe(400);
        expect(await res.json()).toMatchObject({ code: "validation_failed" });
      }
      const none = await api.post(`/v1/runs/${runId}/control`, {});
      expect(none.status).toBe(400);
      held.release();
      const frames = await api.events(runId);
      expect(frames.map((f) => f.event)).not.toContain("user_input");
      expect(frames.at(-1)?.data).toMatchObject({ status: "succeeded", result: "Fine." });
    });
  },
);

describe.skipIf(!process.env.TEST_DATABASE_URL)("steering a run another instance executes", () => {
  let mock: MockAnthropic;
  let a: ClaudeEnv;
  let b: ClaudeEnv;
  let first: TestApp;
  let second: TestApp;
  let onA: ReturnType<typeof calls>;
  let onB: ReturnType<typeof calls>;
  const closers: (() => Promise<void>)[] = [];

  beforeAll(async () => {
    mock = await startMockAnthropic({ quiet: true });
    [a, b] = [await makeClaudeEnv(mock.url), await makeClaudeEnv(mock.url)];
    const settings = {
      AGENT_BRIDGE_WORK_DIR: a.cwd,
      AGENT_BRIDGE_PERMISSION_MODE: "bypassPermissions",
    };
    first = await createTestApp("postgres", { ...a.env, ...settings });
    second = createTestAppOn(first.database, { ...b.env, ...settings });
    const apis: ReturnType<typeof calls>[] = [];
    for (const t of [first, second]) {
      // Each an instance with its lease, hearing commands for its runs, as src/index.ts starts it.
      await t.deps.lease.start();
      await t.deps.doorbell.start();
      closers.push(() => t.deps.lease.stop());
      const server = await listen(t.app);
      closers.push(server.close);
      apis.push(calls(server.url));
    }
    [onA, onB] = apis as [ReturnType<typeof calls>, ReturnType<typeof calls>];
  });
  afterAll(async () => {
    for (const close of closers.reverse()) await close();
    await second.deps.runs.shutdown(0);
    second.deps.doorbell.stop();
    first.deps.doorbell.stop();
    await first.close();
    await mock.close();
    await a.cleanup();
    await b.cleanup();
  });

  it("an input and a set_model posted on B reach A's CLI; once the run is over B answers run_finished", async () => {
    const held = holdUntilReleased();
    mock.script(
      { blocks: [{ type: "text", text: "First." }], hold: held.hold },
      { blocks: [{ type: "text", text: "Second." }] },
    );
    const runId = await onA.start(await onA.session({ model: "claude-sonnet-4-5" }), "hello");
    await held.arrived;
    const before = mock.mainRequests().length;

    const control = await onB.post(`/v1/runs/${runId}/control`, { model: "claude-haiku-4-5" });
    expect(control.status).toBe(200);
    const switched = (await control.json()) as { model: string };
    const input = await onB.post(`/v1/runs/${runId}/input`, { text: "from B" });
    expect(input.status).toBe(202);
    expect(await input.json()).toMatchObject({ type: "user_input", text: "from B" });
    held.release();

    const frames = await onB.events(runId);
    expect(frames.filter((f) => f.event === "completion")).toHaveLength(1);
    expect(frames.at(-1)?.data).toMatchObject({ status: "succeeded", result: "Second." });
    expect(frames.map((f) => f.event)).toEqual(expect.arrayContaining(["control", "user_input"]));
    const next = mock.mainRequests()[before];
    expect(next?.model).toBe(switched.model);
    expect(JSON.stringify(next?.messages.at(-1))).toContain("from B");

    const late = await onB.post(`/v1/runs/${runId}/input`, { text: "too late" });
    expect(late.status).toBe(409);
    expect(await late.json()).toMatchObject({ code: "run_finished" });
  });

  it("a switch A's CLI refuses, posted on B, is B's 409 control_failed", async () => {
    const held = holdUntilReleased();
    mock.script({ blocks: [{ type: "text", text: "Fine." }], hold: held.hold });
    const runId = await onA.start(await onA.session({ permission_mode: "default" }), "hello");
    await held.arrived;
    const res = await onB.post(`/v1/runs/${runId}/control`, {
      permission_mode: "bypassPermissions",
    });
    expect(res.status).toBe(409);
    expect(await res.json()).toMatchObject({ code: "control_failed" });
    held.release();
    const frames = await onB.events(runId);
    expect(frames.at(-1)?.data).toMatchObject({ status: "succeeded" });
  });
});
