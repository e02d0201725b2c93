import { execFile } from "node:child_process";
import { resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { createLogger, type Logger } from "../../src/log.js";
import { startTracing } from "../../src/telemetry/start-tracing.js";
import { activeTraceFields } from "../../src/telemetry/tracing.js";
import { createTestAppOn, type TestApp } from "../support/app.js";
import { type ClaudeEnv, makeClaudeEnv } from "../support/claude-env.js";
import { openTestDatabase } from "../support/db.js";
import { type FakeCli, fakeCli } from "../support/fake-cli.js";
import { streamedReply } from "../support/fake-scenarios.js";
import { type MockAnthropic, startMockAnthropic } from "../support/mock-anthropic.js";
import {
  type OtlpReceiver,
  type ReceivedSpan,
  startOtlpReceiver,
} from "../support/otlp-receiver.js";
import { SseReader } from "../support/sse.js";
import {
  assistant,
  controlRequest,
  result,
  systemInit,
  toolResult,
  toolUse,
} from "../support/stream-json-lines.js";

// OpenTelemetry traces, sent to an OTLP/HTTP receiver in the test as to a collector: the spans of
// a real `claude` run against the mock Messages API; an exporter that fails; and, without an
// endpoint, no SDK at all. Tracing does not depend on the database, so PGlite alone is used.

type Line = Record<string, unknown>;

/** A logger at debug level that keeps its lines, with the active span's ids as the server has. */
function keptLogs(): {
  logger: Logger;
  lines: Line[];
  next(match: (l: Line) => boolean): Promise<Line>;
} {
  const lines: Line[] = [];
  const waiting: { match: (l: Line) => boolean; resolve: (l: Line) => void }[] = [];
  const logger = createLogger(
    "debug",
    {},
    (text) => {
      const line = JSON.parse(text) as Line;
      lines.push(line);
      for (const w of waiting.filter((w) => w.match(line))) {
        waiting.splice(waiting.indexOf(w), 1);
        w.resolve(line);
      }
    },
    activeTraceFields,
  );
  return {
    logger,
    lines,
    /** The next line (from now on) that matches. */
    next: (match) => new Promise((resolve) => waiting.push({ match, resolve })),
  };
}

async function tracedApp(env: Record<string, string>, logger: Logger) {
  const tracing = await startTracing(loadConfig(env), logger);
  return { tracing, t: createTestAppOn(await openTestDatabase("pglite"), env, logger, tracing) };
}

async function post(t: TestApp, path: string, body: unknown): Promise<Response> {
  return t.app.request(path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
}

const byOperation = (spans: ReceivedSpan[], op: string) =>
  spans.filter((s) => s.attributes["gen_ai.operation.name"] === op);

describe("tracing a real claude run (OTEL_EXPORTER_OTLP_ENDPOINT set)", () => {
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

  it("sends the request's server span, the run's invoke_agent span under it and an execute_tool span for its Bash call", async () => {
    const logs = keptLogs();
    const { tracing, t } = await tracedApp(
      {
        ...ce.env,
        AGENT_BRIDGE_WORK_DIR: ce.cwd,
        AGENT_BRIDGE_PERMISSION_MODE: "bypassPermissions",
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      },
      logs.logger,
    );
    try {
      mock.script(
        {
          blocks: [
            {
              type: "tool_use",
              id: "toolu_traced_1",
              name: "Bash",
              input: { command: "echo traced" },
            },
          ],
          usage: { input_tokens: 200, output_tokens: 30, cache_read_input_tokens: 7 },
        },
        {
          blocks: [{ type: "text", text: "Done." }],
          usage: { input_tokens: 250, output_tokens: 5 },
        },
      );
      const session = (await (await post(t, "/v1/sessions", { model: "sonnet" })).json()) as {
        id: string;
      };
      // Logged once the CLI's process group is gone, after the completion.
      const cliFinished = logs.next((l) => l.msg === "claude run finished");
      const frames = await SseReader.of(
        await post(t, `/v1/sessions/${session.id}/messages`, { text: "Run it" }),
      ).events();
      const started = frames[0]?.data as { run_id: string; trace_id?: string };
      const completion = frames.at(-1)?.data as {
        status: string;
        usage: Record<string, number>;
      };
      expect(completion.status).toBe("succeeded");
      expect(started.trace_id).toMatch(/^[0-9a-f]{32}$/);

      // The run's lines carry its trace id, to the last (logged once its CLI's group is gone).
      expect(await cliFinished).toMatchObject({ trace_id: started.trace_id });

      // A query string (where stream tokens ride) is never recorded.
      await t.app.request(`/v1/runs/${started.run_id}/events?token=query-secret`);

      // Shutting down sends what is left, within its bound.
      await tracing.shutdown(10_000);
      const spans = receiver.spans.filter((s) => s.traceId === started.trace_id);

      const [run, ...moreRuns] = byOperation(spans, "invoke_agent");
      expect(moreRuns).toEqual([]);
      const usage = completion.usage as {
        input_tokens: number;
        output_tokens: number;
        cache_read_tokens: number;
        cache_creation_tokens: number;
      };
      expect(run).toMatchObject({
        name: "invoke_agent claude",
        kind: 3,
        status: { code: 0 },
        attributes: {
          "gen_ai.operation.name": "invoke_agent",
          "gen_ai.provider.name": "anthropic",
          "gen_ai.agent.name": "claude",
          "gen_ai.request.model": "sonnet",
          "gen_ai.conversation.id": session.id,
          // Cached input counts as input in the conventions.
          "gen_ai.usage.input_tokens":
            usage.input_tokens + usage.cache_read_tokens + usage.cache_creation_tokens,
          "gen_ai.usage.output_tokens": usage.output_tokens,
          "gen_ai.usage.cache_read.input_tokens": usage.cache_read_tokens,
          "agent_bridge.run.id": started.run_id,
          "agent_bridge.run.status": "succeeded",
          "agent_bridge.run.trigger": "message",
        },
        resource: { "service.name": "agent-bridge" },
      });
      expect(usage.output_tokens).toBeGreaterThan(0);
      expect(run?.attributes["error.type"]).toBeUndefined();

      const [tool, ...moreTools] = byOperation(spans, "execute_tool");
      expect(moreTools).toEqual([]);
      expect(tool).toMatchObject({
        name: "execute_tool Bash",
        parentSpanId: run?.spanId,
        status: { code: 0 },
        attributes: {
          "gen_ai.tool.name": "Bash",
          "gen_ai.tool.call.id": "toolu_traced_1",
          "agent_bridge.tool.kind": "shell_exec",
        },
      });

      const request = spans.find((s) => s.spanId === run?.parentSpanId);
      expect(request).toMatchObject({
        name: "POST /v1/sessions/:id/messages",
        kind: 2,
        parentSpanId: "",
        attributes: {
          "http.request.method": "POST",
          "http.route": "/v1/sessions/:id/messages",
          "url.path": `/v1/sessions/${session.id}/messages`,
          "http.response.status_code": 200,
        },
      });

      expect(receiver.spans.find((s) => s.name === "GET /v1/runs/:id/events")).toMatchObject({
        attributes: { "url.path": `/v1/runs/${started.run_id}/events` },
      });
      expect(JSON.stringify(receiver.spans)).not.toContain("query-secret");

      // The request's log line carries the trace id too.
      const traced = (msg: string) =>
        logs.lines.filter((l) => l.msg === msg && l.trace_id === started.trace_id);
      expect(traced("request").map((l) => l.path)).toEqual([`/v1/sessions/${session.id}/messages`]);
    } finally {
      await t.close();
    }
  });
});

describe("tracing a run that fails", () => {
  it("marks the run's span and a tool call's whose update says error as errors, nests a subagent's call under its Task, and names the message's own model", async () => {
    const receiver = await startOtlpReceiver();
    const fake = await fakeCli({
      steps: [
        { emit: systemInit() },
        { emit: assistant("msg_1", [toolUse("toolu_task", "Task", { prompt: "look" })]) },
        {
          emit: assistant("msg_2", [toolUse("toolu_sub", "Grep", { pattern: "x" })], {
            parent: "toolu_task",
          }),
        },
        { emit: toolResult("toolu_sub", "no matches", { parent: "toolu_task" }) },
        { emit: toolResult("toolu_task", "subagent crashed", { isError: true }) },
        { emit: result({ subtype: "error_during_execution", is_error: true, result: null }) },
      ],
    });
    const { tracing, t } = await tracedApp(
      { ...fake.bridgeEnv, OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url },
      keptLogs().logger,
    );
    try {
      const session = (await (await post(t, "/v1/sessions", { model: "sonnet" })).json()) as {
        id: string;
      };
      const res = await post(t, `/v1/sessions/${session.id}/messages`, {
        text: "hi",
        model: "opus",
      });
      const frames = await SseReader.of(res).events();
      expect(frames.at(-1)?.data).toMatchObject({ status: "failed", error_code: "agent_error" });
      await tracing.shutdown(10_000);

      const [run] = byOperation(receiver.spans, "invoke_agent");
      expect(run).toMatchObject({
        status: { code: 2 },
        attributes: {
          "agent_bridge.run.status": "failed",
          "error.type": "agent_error",
          // The run's model is the message's, not its session's.
          "gen_ai.request.model": "opus",
        },
      });
      const tools = byOperation(receiver.spans, "execute_tool");
      const task = tools.find((s) => s.attributes["gen_ai.tool.call.id"] === "toolu_task");
      const grep = tools.find((s) => s.attributes["gen_ai.tool.call.id"] === "toolu_sub");
      expect(task).toMatchObject({
        parentSpanId: run?.spanId,
        status: { code: 2 },
        attributes: { "error.type": "tool_error", "agent_bridge.tool.kind": "subagent_task" },
      });
      expect(grep).toMatchObject({ parentSpanId: task?.spanId, status: { code: 0 } });
    } finally {
      await t.close();
      await fake.cleanup();
      await receiver.close();
    }
  });
});

describe("tracing a run's permission requests", () => {
  it("gives a request a permission span from its permission_request to its answer, under its tool call", async () => {
    const receiver = await startOtlpReceiver();
    const fake = await fakeCli({
      steps: [
        { emit: systemInit() },
        { emit: assistant("msg_1", [toolUse("toolu_make", "Bash", { command: "make" })]) },
        { emit: controlRequest("req_make", "Bash", { command: "make" }, "toolu_make") },
        { waitStdin: "control_response" },
        { emit: toolResult("toolu_make", "Permission denied", { isError: true }) },
        { emit: result({ result: "I may not run make." }) },
      ],
    });
    const { tracing, t } = await tracedApp(
      { ...fake.bridgeEnv, OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url },
      keptLogs().logger,
    );
    try {
      const session = (await (await post(t, "/v1/sessions", {})).json()) as { id: string };
      const res = await post(t, `/v1/sessions/${session.id}/messages`, { text: "build" });
      const frames = await SseReader.of(res).events();
      // The request shows after the tool call it is about, as the CLI told them.
      expect(frames.map((f) => f.event)).toEqual([
        "run_started",
        "status",
        "permission_request",
        "permission_resolved",
        "text_delta",
        "completion",
      ]);
      await tracing.shutdown(10_000);

      const [tool] = byOperation(receiver.spans, "execute_tool");
      const permission = receiver.spans.find((s) => s.name === "permission Bash");
      expect(permission).toMatchObject({
        parentSpanId: tool?.spanId,
        attributes: {
          "gen_ai.tool.call.id": "toolu_make",
          "agent_bridge.permission.request_id": "req_make",
          "agent_bridge.permission.decision": "deny",
          "agent_bridge.permission.by": "policy",
        },
      });
    } finally {
      await t.close();
      await fake.cleanup();
      await receiver.close();
    }
  });
});

describe("tracing with an exporter that fails", () => {
  let fake: FakeCli;
  let receiver: OtlpReceiver;
  beforeAll(async () => {
    fake = await fakeCli(streamedReply(["ok"]));
    receiver = await startOtlpReceiver(500);
  });
  afterAll(async () => {
    await receiver.close();
    await fake.cleanup();
  });

  it("logs the first refused export once, later ones at debug level, and goes on serving", async () => {
    const logs = keptLogs();
    // Batches go out at once rather than after the default 5 s.
    const before = process.env.OTEL_BSP_SCHEDULE_DELAY;
    process.env.OTEL_BSP_SCHEDULE_DELAY = "1";
    let traced: Awaited<ReturnType<typeof tracedApp>>;
    try {
      traced = await tracedApp(
        { ...fake.bridgeEnv, OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url },
        logs.logger,
      );
    } finally {
      if (before === undefined) delete process.env.OTEL_BSP_SCHEDULE_DELAY;
      else process.env.OTEL_BSP_SCHEDULE_DELAY = before;
    }
    const { t, tracing } = traced;
    try {
      const runOnce = async () => {
        const session = (await (await post(t, "/v1/sessions", {})).json()) as { id: string };
        const res = await post(t, `/v1/sessions/${session.id}/messages`, { text: "hi" });
        return (await SseReader.of(res).events()).at(-1)?.data;
      };
      const exportFailed = (l: Line) => String(l.msg).startsWith("could not export spans");
      const first = logs.next(exportFailed);
      expect(await runOnce()).toMatchObject({ status: "succeeded" });
      expect(await first).toMatchObject({ level: "error", endpoint: `${receiver.url}/v1/traces` });
      const second = logs.next(exportFailed);
      expect(await runOnce()).toMatchObject({ status: "succeeded" });
      expect(await second).toMatchObject({ level: "debug" });
      expect(logs.lines.filter((l) => exportFailed(l) && l.level === "error")).toHaveLength(1);
      await tracing.shutdown(10_000);
    } finally {
      await t.close();
    }
  });
});

describe("without OTEL_EXPORTER_OTLP_ENDPOINT", () => {
  const probe = resolve(import.meta.dirname, "../support/tracing-probe.ts");
  /** The OpenTelemetry packages a server process with this environment loads. */
  async function packagesLoaded(env: Record<string, string>): Promise<string[]> {
    const { stdout } = await promisify(execFile)(process.execPath, ["--import", "tsx", probe], {
      env: { PATH: process.env.PATH ?? "", ...env },
    });
    return JSON.parse(stdout) as string[];
  }

  it("loads no OpenTelemetry SDK, only the API (which does nothing then)", async () => {
    const receiver = await startOtlpReceiver();
    try {
      const [off, on] = await Promise.all([
        packagesLoaded({}),
        packagesLoaded({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url }),
      ]);
      expect(off).toEqual(["@opentelemetry/api"]);
      // The probe sees the SDK when it is there.
      expect(on).toEqual(
        expect.arrayContaining([
          "@opentelemetry/sdk-trace-node",
          "@opentelemetry/exporter-trace-otlp-http",
        ]),
      );
      // The probe's one span went to the receiver, and none from the process without an endpoint.
      expect(receiver.spans.map((s) => s.name)).toEqual(["invoke_agent claude"]);
    } finally {
      await receiver.close();
    }
  });

  it("starts runs with no trace id", async () => {
    const fake = await fakeCli(streamedReply(["ok"]));
    const t = createTestAppOn(await openTestDatabase("pglite"), fake.bridgeEnv);
    try {
      const session = (await (await post(t, "/v1/sessions", {})).json()) as { id: string };
      const res = await post(t, `/v1/sessions/${session.id}/messages`, { text: "hi" });
      const [started] = await SseReader.of(res).events();
      expect(started?.event).toBe("run_started");
      expect(started?.data).not.toHaveProperty("trace_id");
    } finally {
      await t.close();
      await fake.cleanup();
    }
  });
});

describe("the CLI's own telemetry", () => {
  it("gets the run id in OTEL_RESOURCE_ATTRIBUTES, after what the operator set", async () => {
    const fake = await fakeCli(streamedReply(["ok"]));
    const t = createTestAppOn(await openTestDatabase("pglite"), {
      ...fake.bridgeEnv,
      CLAUDE_CODE_ENABLE_TELEMETRY: "1",
      OTEL_RESOURCE_ATTRIBUTES: "team=infra",
      OTEL_METRICS_EXPORTER: "otlp",
    });
    try {
      const session = (await (await post(t, "/v1/sessions", {})).json()) as { id: string };
      const res = await post(t, `/v1/sessions/${session.id}/messages`, { text: "hi" });
      const [started] = await SseReader.of(res).events();
      const { run_id } = (started?.data ?? {}) as { run_id?: string };
      const { env } = await fake.record();
      expect(env).toMatchObject({
        CLAUDE_CODE_ENABLE_TELEMETRY: "1",
        OTEL_METRICS_EXPORTER: "otlp",
        OTEL_RESOURCE_ATTRIBUTES: `team=infra,agent_bridge.run_id=${run_id}`,
      });
    } finally {
      await t.close();
      await fake.cleanup();
    }
  });
});
