import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { silentLogger } from "../../src/log.js";
import { startTracing } from "../../src/telemetry/start-tracing.js";
import { createTestAppOn, type TestApp } from "../support/app.js";
import { type ClaudeEnv, makeClaudeEnv } from "../support/claude-env.js";
import { type CodexEnv, makeCodexEnv } from "../support/codex-env.js";
import { openTestDatabase } from "../support/db.js";
import {
  holdUntilReleased,
  type MockAnthropic,
  startMockAnthropic,
} from "../support/mock-anthropic.js";
import { type MockOpenAI, shellCall, startMockOpenAI } from "../support/mock-openai.js";
import {
  type OtlpReceiver,
  type ReceivedSpan,
  startOtlpReceiver,
} from "../support/otlp-receiver.js";
import { SseReader } from "../support/sse.js";

// Spans per event (AGENT_BRIDGE_TRACE_EVENTS): the real `claude` CLI against the mock Messages
// API, its spans sent to an OTLP receiver in the test. Tracing does not depend on the database,
// so PGlite alone is used.

const CAP = 8 * 1024;

async function tracedApp(env: Record<string, string>) {
  const tracing = await startTracing(loadConfig(env), silentLogger);
  return {
    tracing,
    t: createTestAppOn(await openTestDatabase("pglite"), env, silentLogger, tracing),
  };
}

async function post(t: TestApp, path: string, body: unknown): Promise<Response> {
  return t.app.request(path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
}

/** A run's trace: its prompt spans, and each one's children in the order they happened. */
function turnsOf(spans: ReceivedSpan[], traceId: string) {
  const own = spans.filter((s) => s.traceId === traceId);
  const prompts = own
    .filter((s) => s.name === "prompt")
    .sort(
      (a, b) =>
        Number(a.attributes["agent_bridge.turn"]) - Number(b.attributes["agent_bridge.turn"]),
    );
  return prompts.map((prompt) => ({
    prompt,
    children: own
      .filter((s) => s.parentSpanId === prompt.spanId)
      .sort(
        (a, b) =>
          Number(a.attributes["agent_bridge.event.index"]) -
          Number(b.attributes["agent_bridge.event.index"]),
      ),
  }));
}

describe("spans per event of a real claude run", () => {
  let mock: MockAnthropic;
  let ce: ClaudeEnv;
  let receiver: OtlpReceiver;

  beforeAll(async () => {
    mock = await startMockAnthropic({ quiet: true });
    ce = await makeClaudeEnv(mock.url);
    receiver = await startOtlpReceiver();
  });
  afterAll(async () => {
    await receiver.close();
    await mock.close();
    await ce.cleanup();
  });

  const runOnce = async (env: Record<string, string>, session: Record<string, unknown> = {}) => {
    const { tracing, t } = await tracedApp({
      ...ce.env,
      AGENT_BRIDGE_WORK_DIR: ce.cwd,
      AGENT_BRIDGE_PERMISSION_MODE: "bypassPermissions",
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      ...env,
    });
    const created = (await (await post(t, "/v1/sessions", session)).json()) as { id: string };
    return { tracing, t, sessionId: created.id };
  };

  it("makes each turn a prompt span under the run's, with a child per event in order, each carrying its raw line and its event, capped, its credentials redacted", async () => {
    // The tool's output: the CLI's environment (its credential among it), and more than the cap.
    const command = "env; head -c 20000 /dev/zero | tr '\\0' x";
    mock.script(
      {
        blocks: [
          { type: "text", text: "Looking." },
          { type: "tool_use", id: "toolu_events_1", name: "Bash", input: { command } },
        ],
      },
      { blocks: [{ type: "text", text: "Done." }] },
    );
    const { tracing, t, sessionId } = await runOnce({ AGENT_BRIDGE_TRACE_EVENTS: "true" });
    try {
      const frames = await SseReader.of(
        await post(t, `/v1/sessions/${sessionId}/messages`, { text: "Run it" }),
      ).events();
      const started = frames[0]?.data as { trace_id: string };
      expect(frames.at(-1)?.data).toMatchObject({ status: "succeeded" });
      await tracing.shutdown(10_000);

      const run = receiver.spans.find(
        (s) => s.traceId === started.trace_id && s.name === "invoke_agent claude",
      );
      const turns = turnsOf(receiver.spans, started.trace_id);
      expect(turns).toHaveLength(1);
      const [turn] = turns;
      expect(turn?.prompt).toMatchObject({
        parentSpanId: run?.spanId,
        attributes: { "agent_bridge.turn": 1 },
      });
      const children = turn?.children ?? [];
      const names = children.map((s) => s.name);
      // The seed's order: the CLI's initialize and its answer, the prompt, the system line, the
      // text, the tool call, its result, the completion.
      const firstOf = (name: string) => names.indexOf(name);
      expect(firstOf("control_request initialize")).toBe(0);
      expect(firstOf("control_response initialize")).toBeGreaterThan(0);
      expect(firstOf("input")).toBeGreaterThan(0);
      expect(firstOf("system")).toBeGreaterThan(firstOf("input"));
      expect(firstOf("message")).toBeGreaterThan(firstOf("system"));
      expect(firstOf("tool_call")).toBeGreaterThan(firstOf("message"));
      expect(firstOf("tool_update")).toBeGreaterThan(firstOf("tool_call"));
      expect(names.lastIndexOf("message")).toBeGreaterThan(firstOf("tool_update"));
      expect(names.at(-1)).toBe("completion");
      expect(turn?.prompt.attributes["agent_bridge.turn.events"]).toBe(children.length);

      // Every child carries the raw line; those with an event, the event too.
      for (const span of children) {
        expect(typeof span.attributes["agent_bridge.event.raw"]).toBe("string");
        expect(
          Buffer.byteLength(String(span.attributes["agent_bridge.event.raw"])),
        ).toBeLessThanOrEqual(CAP);
      }
      const system = children[firstOf("system")];
      expect(JSON.parse(String(system?.attributes["agent_bridge.event.raw"]))).toMatchObject({
        type: "system",
        subtype: "init",
      });
      // A streamed message is one span, with its chunks counted and its text whole.
      const message = children[firstOf("message")];
      expect(message?.attributes).toMatchObject({
        "agent_bridge.event.type": "text_delta",
        "agent_bridge.event.raw_truncated": false,
        "agent_bridge.event.normalized_truncated": false,
      });
      expect(Number(message?.attributes["agent_bridge.message.chunks"])).toBeGreaterThan(0);
      expect(JSON.parse(String(message?.attributes["agent_bridge.event.normalized"]))).toEqual({
        type: "text_delta",
        text: "Looking.",
      });
      const call = children[firstOf("tool_call")];
      expect(JSON.parse(String(call?.attributes["agent_bridge.event.normalized"]))).toMatchObject({
        type: "tool_call",
        tool_use_id: "toolu_events_1",
        tool_name: "Bash",
      });
      // The tool's output is over the cap: cut, and said so.
      const update = children[firstOf("tool_update")];
      expect(update?.attributes).toMatchObject({
        "agent_bridge.event.raw_truncated": true,
        "agent_bridge.event.normalized_truncated": true,
      });
      for (const key of ["agent_bridge.event.raw", "agent_bridge.event.normalized"]) {
        const value = String(update?.attributes[key]);
        expect(Buffer.byteLength(value)).toBeLessThanOrEqual(CAP);
        // Near the cap: a redacted credential makes it shorter.
        expect(Buffer.byteLength(value)).toBeGreaterThan(CAP / 2);
      }
      const completion = children.at(-1);
      expect(
        JSON.parse(String(completion?.attributes["agent_bridge.event.normalized"])),
      ).toMatchObject({
        type: "completion",
        status: "succeeded",
      });
      expect(JSON.parse(String(completion?.attributes["agent_bridge.event.raw"]))).toMatchObject({
        type: "result",
      });

      // The CLI's credential (the run's token, in the variable it reads) was in the output:
      // never in a span, redacted where it stood.
      const everything = JSON.stringify(receiver.spans);
      const credential =
        /(ANTHROPIC_API_KEY|ANTHROPIC_AUTH_TOKEN|CLAUDE_CODE_OAUTH_TOKEN)=([^\\\s"]*)/g;
      const shown = [...everything.matchAll(credential)].map((m) => m[2]);
      expect(shown.length).toBeGreaterThan(0);
      expect(new Set(shown)).toEqual(new Set(["[redacted]"]));
    } finally {
      await t.close();
    }
  });

  it("makes no prompt span, nor any per event, without AGENT_BRIDGE_TRACE_EVENTS", async () => {
    mock.script({ blocks: [{ type: "text", text: "Plain." }] });
    const { tracing, t, sessionId } = await runOnce({});
    try {
      const frames = await SseReader.of(
        await post(t, `/v1/sessions/${sessionId}/messages`, { text: "Hi" }),
      ).events();
      const started = frames[0]?.data as { trace_id: string };
      expect(frames.at(-1)?.data).toMatchObject({ status: "succeeded" });
      await tracing.shutdown(10_000);
      const own = receiver.spans.filter((s) => s.traceId === started.trace_id);
      // The request's span and the run's, as before: no prompt, nothing per event.
      expect(own.map((s) => s.name).sort()).toEqual([
        "POST /v1/sessions/:id/messages",
        "invoke_agent claude",
      ]);
    } finally {
      await t.close();
    }
  });

  it("shows a permission request and its answer as a control_request can_use_tool span and a control_response span", async () => {
    // A write, which the CLI asks about in its default mode.
    mock.script(
      {
        blocks: [
          {
            type: "tool_use",
            id: "toolu_events_ask",
            name: "Write",
            input: { file_path: join(ce.cwd, "asked.txt"), content: "x" },
          },
        ],
      },
      { blocks: [{ type: "text", text: "Written." }] },
    );
    const { tracing, t, sessionId } = await runOnce(
      { AGENT_BRIDGE_TRACE_EVENTS: "true", AGENT_BRIDGE_PERMISSION_MODE: "default" },
      { approvals: "api" },
    );
    try {
      const res = await post(t, `/v1/sessions/${sessionId}/messages`, { text: "Ask first" });
      const runId = res.headers.get("x-run-id") ?? "";
      const sse = SseReader.of(res);
      const shown = await sse.until("permission_request");
      const started = shown[0]?.data as { trace_id: string };
      const request = shown.at(-1)?.data as { request_id: string };
      const answered = await post(t, `/v1/runs/${runId}/permissions/${request.request_id}`, {
        decision: "allow",
      });
      expect(answered.status).toBe(200);
      expect((await sse.until("completion")).at(-1)?.data).toMatchObject({ status: "succeeded" });
      await tracing.shutdown(10_000);

      const [turn] = turnsOf(receiver.spans, started.trace_id);
      const children = turn?.children ?? [];
      const asked = children.findIndex((s) => s.name === "control_request can_use_tool");
      const answer = children.findIndex((s) => s.name === "control_response can_use_tool");
      expect(asked).toBeGreaterThan(-1);
      expect(answer).toBeGreaterThan(asked);
      expect(children[asked]?.attributes).toMatchObject({
        "agent_bridge.event.direction": "from_cli",
        "agent_bridge.control.subtype": "can_use_tool",
        "agent_bridge.control.request_id": request.request_id,
      });
      expect(
        JSON.parse(String(children[asked]?.attributes["agent_bridge.event.raw"])),
      ).toMatchObject({
        type: "control_request",
        request: { subtype: "can_use_tool", tool_name: "Write" },
      });
      expect(children[answer]?.attributes).toMatchObject({
        "agent_bridge.event.direction": "to_cli",
        "agent_bridge.control.request_id": request.request_id,
      });
      expect(
        JSON.parse(String(children[answer]?.attributes["agent_bridge.event.raw"])),
      ).toMatchObject({
        type: "control_response",
        response: { request_id: request.request_id, response: { behavior: "allow" } },
      });
    } finally {
      await t.close();
    }
  });

  it("makes a steered run's two turns two prompt spans, the input and a set_model request with its answer among the first's", async () => {
    const held = holdUntilReleased();
    mock.script(
      { blocks: [{ type: "text", text: "First answer." }], hold: held.hold },
      { blocks: [{ type: "text", text: "Steered answer." }] },
    );
    const { tracing, t, sessionId } = await runOnce({ AGENT_BRIDGE_TRACE_EVENTS: "true" });
    try {
      const res = await t.app.request(`/v1/sessions/${sessionId}/messages`, {
        method: "POST",
        headers: { "Content-Type": "application/json", Prefer: "respond-async" },
        body: JSON.stringify({ text: "say something" }),
      });
      expect(res.status).toBe(202);
      const runId = ((await res.json()) as { id: string }).id;
      await held.arrived;
      expect((await post(t, `/v1/runs/${runId}/input`, { text: "now in French" })).status).toBe(
        202,
      );
      expect((await post(t, `/v1/runs/${runId}/control`, { model: "haiku" })).status).toBe(200);
      held.release();
      const frames = await SseReader.of(
        await t.app.request(`/v1/runs/${runId}/events?events=full`),
      ).events();
      const started = frames[0]?.data as { trace_id: string };
      expect(frames.at(-1)?.data).toMatchObject({ status: "succeeded", result: "Steered answer." });
      await tracing.shutdown(10_000);

      const [first, second, ...more] = turnsOf(receiver.spans, started.trace_id);
      expect(more).toEqual([]);
      const names = (first?.children ?? []).map((s) => s.name);
      // The message, then the steering input: written while the first turn ran.
      expect(names.filter((n) => n === "input")).toHaveLength(2);
      expect(
        first?.children[names.lastIndexOf("input")]?.attributes["agent_bridge.event.raw"],
      ).toContain("now in French");
      const asked = names.indexOf("control_request set_model");
      expect(asked).toBeGreaterThan(-1);
      expect(names.indexOf("control_response set_model")).toBeGreaterThan(asked);
      // The first turn's result ends it, though the run goes on.
      expect(names.at(-1)).toBe("completion");
      expect(first?.children.at(-1)?.attributes["agent_bridge.event.normalized"]).toBeUndefined();
      expect(second?.prompt.attributes["agent_bridge.turn"]).toBe(2);
      const last = second?.children.at(-1);
      expect(last?.name).toBe("completion");
      expect(JSON.parse(String(last?.attributes["agent_bridge.event.normalized"]))).toMatchObject({
        type: "completion",
        result: "Steered answer.",
      });
    } finally {
      await t.close();
    }
  });
});

describe("spans per event of a real codex run", () => {
  let mock: MockOpenAI;
  let ce: CodexEnv;
  let receiver: OtlpReceiver;

  beforeAll(async () => {
    mock = await startMockOpenAI({ quiet: true });
    ce = await makeCodexEnv(mock.url);
    receiver = await startOtlpReceiver();
  });
  afterAll(async () => {
    await receiver.close();
    await mock.close();
    await ce.cleanup();
  });

  it("gets the same hook from the driver: its prompt (plain text), its JSONL lines' events, and its completion", async () => {
    mock.script(
      { output: [shellCall("echo spans-by-codex", "call_spans")] },
      { output: [{ type: "message", text: "Ran it." }] },
    );
    const { tracing, t } = await tracedApp({
      ...ce.env,
      AGENT_BRIDGE_AGENTS: "claude,codex",
      AGENT_BRIDGE_WORK_DIR: ce.cwd,
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      AGENT_BRIDGE_TRACE_EVENTS: "true",
    });
    try {
      const session = (await (
        await post(t, "/v1/sessions", { agent: "codex", permission_mode: "bypassPermissions" })
      ).json()) as { id: string };
      const frames = await SseReader.of(
        await post(t, `/v1/sessions/${session.id}/messages`, { text: "Run echo" }),
      ).events();
      const started = frames[0]?.data as { trace_id: string };
      expect(frames.at(-1)?.data).toMatchObject({ status: "succeeded" });
      await tracing.shutdown(10_000);

      const [turn, ...more] = turnsOf(receiver.spans, started.trace_id);
      expect(more).toEqual([]);
      const names = (turn?.children ?? []).map((s) => s.name);
      expect(names[0]).toBe("input");
      expect(turn?.children[0]?.attributes["agent_bridge.event.raw"]).toContain("Run echo");
      expect(names.indexOf("tool_update")).toBeGreaterThan(names.indexOf("tool_call"));
      expect(names.indexOf("tool_call")).toBeGreaterThan(0);
      expect(names.at(-1)).toBe("completion");
      const call = turn?.children[names.indexOf("tool_call")];
      expect(JSON.parse(String(call?.attributes["agent_bridge.event.raw"]))).toMatchObject({
        type: "item.started",
      });
    } finally {
      await t.close();
    }
  });
});
