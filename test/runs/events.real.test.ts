import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { httpApi } from "../support/app.js";
import { REAL_CLI_BACKENDS } from "../support/db.js";
import { holdUntilReleased, type MockAnthropic } from "../support/mock-anthropic.js";
import { type RealClaudeApp, realClaudeApp } from "../support/real-claude.js";
import { type Frame, SseReader } from "../support/sse.js";

// What a client sees of a run of the real `claude` binary (against the mock Messages API): the
// session it runs in, how full the context is, the text meant for the user and nothing else,
// and why a run has gone quiet.

const of = (frames: Frame[], event: string) => frames.filter((f) => f.event === event);
const data = <T = Record<string, unknown>>(frame: Frame | undefined) => frame?.data as T;

describe.each(REAL_CLI_BACKENDS)("events of the real claude CLI on %s", (backend) => {
  let mock: MockAnthropic;
  let server: { url: string; close(): Promise<void> };
  let api: ReturnType<typeof httpApi>;

  let app: RealClaudeApp;
  beforeAll(async () => {
    app = await realClaudeApp(backend);
    ({ mock, server, api } = app);
  });
  afterAll(() => app.close());

  /** POSTs a message asking for the full view; its frames until the completion. */
  const fullRun = async (sessionId: string, text: string) => {
    const res = await fetch(`${server.url}/v1/sessions/${sessionId}/messages?events=full`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ text }),
    });
    return { runId: res.headers.get("x-run-id") ?? "", frames: await SseReader.of(res).events() };
  };
  const events = async (runId: string, view: "default" | "full") =>
    SseReader.of(await fetch(`${server.url}/v1/runs/${runId}/events?events=${view}`)).events();

  it("?events=full on a message streams the full view, numbered as GET …/events?events=full replays it", async () => {
    mock.script({ blocks: [{ type: "text", text: "Hello." }] });
    const session = await api.newSession();
    const { runId, frames } = await fullRun(session.id, "hi");
    expect(frames.map((f) => f.event)).toContain("context_window");
    expect(frames.map((f) => f.raw)).toEqual((await events(runId, "full")).map((f) => f.raw));
  });

  it("starts each run with session_status (new, then resumed) and the available slash commands", async () => {
    const session = await api.newSession();
    mock.script({ blocks: [{ type: "text", text: "First." }] });
    const first = await fullRun(session.id, "one");
    expect(first.frames.slice(1, 3).map((f) => f.event)).toEqual([
      "session_status",
      "available_commands",
    ]);
    const status = data(of(first.frames, "session_status")[0]);
    expect(status).toMatchObject({
      status: "new",
      agent_session_id: session.id,
      model: expect.any(String),
      mcp_servers: [],
    });
    expect(status.tools).toEqual(expect.arrayContaining(["Bash", "Read"]));
    expect(data(of(first.frames, "available_commands")[0])).toMatchObject({
      // Described by the CLI's answer to the bridge's `initialize`.
      commands: expect.arrayContaining([
        expect.objectContaining({ name: "compact", description: expect.any(String) }),
      ]),
    });

    mock.script({ blocks: [{ type: "text", text: "Second." }] });
    const second = await fullRun(session.id, "two");
    expect(data(of(second.frames, "session_status")[0])).toMatchObject({
      status: "resumed",
      agent_session_id: session.id,
    });
    // Internal events: the default view leaves them out.
    const shown = (await events(second.runId, "default")).map((f) => f.event);
    expect(shown).not.toContain("session_status");
    expect(shown).not.toContain("available_commands");
  });

  it("says how full the context is after each main-thread message, and at the result; the session's next run starts again from the documented window", async () => {
    mock.script(
      {
        blocks: [{ type: "tool_use", name: "Bash", input: { command: "echo hi" } }],
        usage: { input_tokens: 1000, cache_read_input_tokens: 200, output_tokens: 30 },
      },
      {
        blocks: [{ type: "text", text: "It printed hi." }],
        usage: { input_tokens: 1100, cache_read_input_tokens: 200, output_tokens: 50 },
      },
    );
    const session = await api.newSession();
    const { frames } = await fullRun(session.id, "run it");
    const windows = of(frames, "context_window").map((f) => data(f));
    expect(windows).toEqual([
      {
        type: "context_window",
        used: 1230,
        size: 200_000,
        remaining: 198_770,
        efficiency: 0.00615,
      },
      {
        type: "context_window",
        used: 1350,
        size: 200_000,
        remaining: 198_650,
        efficiency: 0.00675,
      },
      // The result's modelUsage knows the model's own window.
      {
        type: "context_window",
        used: 1350,
        size: 1_000_000,
        remaining: 998_650,
        efficiency: 0.00135,
      },
    ]);
    // The first one follows its message. Not necessarily before the tool's result: the CLI runs
    // a tool as soon as its block is complete, and may report the result before the message's end.
    const order = frames.map((f) => f.event);
    expect(order.indexOf("context_window")).toBeGreaterThan(order.indexOf("tool_call"));

    // The CLI names the window only in a result: the session's next run starts again from the
    // documented one, and its result corrects it.
    mock.script({
      blocks: [{ type: "text", text: "Again." }],
      usage: { input_tokens: 1500, output_tokens: 10 },
    });
    const next = await fullRun(session.id, "again");
    expect(of(next.frames, "context_window").map((f) => data(f).size)).toEqual([
      200_000, 1_000_000,
    ]);
  });

  it("keeps a subagent's text out of the default stream, the JSON text and the result", async () => {
    // The subagent runs beside the main conversation, so each conversation gets its own turns:
    // neither the order of their requests nor the turn the CLI starts when the subagent reports
    // back (after its result, before it exits) takes another test's turns.
    const mainAnswer = holdUntilReleased();
    mock.scriptFor(
      "delegate it",
      {
        blocks: [
          { type: "text", text: "Delegating." },
          {
            type: "tool_use",
            name: "Agent",
            input: {
              description: "Gather notes",
              prompt: "Gather the notes, subagent",
              subagent_type: "general-purpose",
            },
          },
        ],
      },
      // Answered once the subagent's text is in the run's events: the run ends at the main
      // conversation's result, which would otherwise (on a loaded machine) come first.
      { blocks: [{ type: "text", text: "Here is the answer." }], hold: mainAnswer.hold },
    );
    mock.scriptFor("Gather the notes, subagent", {
      blocks: [{ type: "text", text: "SUBAGENT NOTES" }],
    });
    const session = await api.newSession();
    const res = await fetch(`${server.url}/v1/sessions/${session.id}/messages?events=full`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ text: "delegate it" }),
    });
    const stream = SseReader.of(res);
    const full = await stream.until("subagent_text_delta");
    mainAnswer.release();
    full.push(...(await stream.events()));
    const call = data<{ tool_use_id: string }>(of(full, "tool_call")[0]);
    expect(of(full, "subagent_text_delta").map((f) => data(f))).toEqual([
      { type: "subagent_text_delta", text: "SUBAGENT NOTES", parent_tool_use_id: call.tool_use_id },
    ]);
    const completion = data<{ result: string }>(full.at(-1));
    expect(completion.result).toBe("Here is the answer.");
    // What a JSON reply gives as its text: the default view's text deltas.
    const shown = await events(res.headers.get("x-run-id") ?? "", "default");
    expect(
      of(shown, "text_delta")
        .map((f) => data<{ text: string }>(f).text)
        .join(""),
    ).toBe("Delegating.\n\nHere is the answer.");
    expect(JSON.stringify(shown)).not.toContain("SUBAGENT NOTES");
  });

  it("tells the default stream why the run is waiting when the API is being retried", async () => {
    mock.script(
      { error: { status: 529, type: "overloaded_error", message: "Overloaded" }, once: true },
      { blocks: [{ type: "text", text: "Made it." }] },
    );
    const session = await api.newSession();
    const frames = await SseReader.of(await api.postMessage(session.id, "try")).events();
    const [retrying] = of(frames, "status").map((f) => data<{ message: string }>(f).message);
    expect(retrying).toMatch(/^API error \(529 overloaded\), retrying 1\/10 in \d+(\.\d)? s$/);
    expect(frames.at(-1)?.data).toMatchObject({ status: "succeeded", result: "Made it." });
  });

  it("gives a local command's output (/compact) as the run's text", async () => {
    const session = await api.newSession();
    mock.script({ blocks: [{ type: "text", text: "Hello." }] });
    await (await api.postMessage(session.id, "hi", { Accept: "application/json" })).json();
    mock.script({ blocks: [{ type: "text", text: "A summary of the conversation." }] });
    const compacted = await (
      await api.postMessage(session.id, "/compact", { Accept: "application/json" })
    ).json();
    expect(compacted).toMatchObject({ run: { status: "succeeded" }, text: "Compacted" });
  });
});
