import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runs } from "../../src/store/schema.js";
import { agentMatrix } from "../support/agents.js";
import { createTestApp, httpApi, listen, type TestApp } from "../support/app.js";
import type { ClaudeEnv } from "../support/claude-env.js";
import { REAL_CLI_BACKENDS } from "../support/db.js";
import { chunk, holdUntilReleased, type MockAnthropic } from "../support/mock-anthropic.js";
import { type Model, startModel } from "../support/models.js";
import { type RealClaudeApp, realClaudeApp } from "../support/real-claude.js";
import { SseReader } from "../support/sse.js";

// The whole path with the real `claude` binary: HTTP -> run manager -> CLI -> a mock Messages
// API on loopback -> events back over SSE, JSON and async. The same for codex is in
// test/agents/codex/sessions.real.test.ts; what follows a run that ended early runs for both.

/** Processes whose command line mentions the session: its CLI, while one runs. */
function processesOf(sessionId: string): string[] {
  try {
    return execFileSync("pgrep", ["-f", sessionId], { encoding: "utf8" })
      .split("\n")
      .filter(Boolean);
  } catch {
    return [];
  }
}

/** Kills the run's CLI with SIGKILL to its group as soon as the run has recorded it. */
async function killOnceRunning(t: TestApp, runId: string): Promise<void> {
  for (;;) {
    const [run] = await t.database.db.select().from(runs).where(eq(runs.id, runId));
    if (run?.pgid) {
      process.kill(-run.pgid, "SIGKILL");
      return;
    }
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe.each(REAL_CLI_BACKENDS)("the real claude CLI through HTTP on %s", (backend) => {
  let mock: MockAnthropic;
  let ce: ClaudeEnv;
  let server: { url: string; close(): Promise<void> };
  let api: ReturnType<typeof httpApi>;

  let app: RealClaudeApp;
  beforeAll(async () => {
    app = await realClaudeApp(backend);
    ({ mock, ce, server, api } = app);
  });
  afterAll(() => app.close());

  it("streams the model's text as deltas whose concatenation is exactly that text, then the usage", async () => {
    const text = "Streaming from the real CLI, through the bridge.";
    mock.script({
      blocks: [{ type: "text", text }],
      usage: {
        input_tokens: 321,
        output_tokens: 54,
        cache_read_input_tokens: 10,
        cache_creation_input_tokens: 5,
      },
    });
    const session = await api.newSession();
    const frames = await SseReader.of(await api.postMessage(session.id, "Say something")).events();
    const deltas = frames.filter((f) => f.event === "text_delta");
    expect(frames[0]?.event).toBe("run_started");
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.map((f) => (f.data as { text: string }).text).join("")).toBe(text);
    expect(frames.at(-1)).toMatchObject({
      event: "completion",
      data: {
        status: "succeeded",
        result: text,
        usage: {
          input_tokens: 321,
          output_tokens: 54,
          cache_read_tokens: 10,
          cache_creation_tokens: 5,
        },
        agent_session_id: session.id,
        claude_session_id: session.id,
      },
    });
    expect((frames.at(-1)?.data as { cost_usd?: number } | undefined)?.cost_usd).toBeGreaterThan(0);
    // The session and the run name their agent and the CLI's own session id.
    expect(session).toMatchObject({ agent: "claude", agent_session_id: null });
    const runId = (frames[0]?.data as { run_id?: string } | undefined)?.run_id;
    expect(await api.json(`/v1/runs/${runId}`)).toMatchObject({
      agent: "claude",
      agent_session_id: session.id,
      claude_session_id: session.id,
    });
    expect(await api.json(`/v1/sessions/${session.id}`)).toMatchObject({
      agent: "claude",
      agent_session_id: session.id,
    });
  });

  it("runs a Bash tool for real and says so with a status event", async () => {
    mock.script(
      {
        blocks: [
          { type: "tool_use", name: "Bash", input: { command: "echo bridged > bridged.txt" } },
        ],
      },
      { blocks: [{ type: "text", text: "Wrote it." }] },
    );
    const session = await api.newSession();
    const frames = await SseReader.of(await api.postMessage(session.id, "Write the file")).events();
    expect(frames.find((f) => f.event === "status")?.data).toMatchObject({
      message: "Using Bash…",
      tool_name: "Bash",
    });
    expect(frames.at(-1)?.data).toMatchObject({ status: "succeeded", result: "Wrote it." });
    expect(existsSync(join(ce.cwd, "bridged.txt"))).toBe(true);
  });

  it("answers as JSON, and resumes the CLI session on the next message", async () => {
    const session = await api.newSession();
    mock.script({ blocks: [{ type: "text", text: "First answer." }] });
    const first = await (
      await api.postMessage(session.id, "remember the word apricot", { Accept: "application/json" })
    ).json();
    expect(first).toMatchObject({ text: "First answer.", run: { status: "succeeded" } });

    mock.script({ blocks: [{ type: "text", text: "Second answer." }] });
    const second = await (
      await api.postMessage(session.id, "which word?", { Accept: "application/json" })
    ).json();
    expect(second.text).toBe("Second answer.");
    const seen = JSON.stringify(mock.mainRequests().at(-1)?.messages);
    expect(seen).toContain("remember the word apricot");
    expect(seen).toContain("First answer.");
  });

  it("an API error is one failed completion with the API's message", async () => {
    mock.script({
      error: { status: 400, type: "invalid_request_error", message: "prompt is malformed" },
    });
    const session = await api.newSession();
    const frames = await SseReader.of(await api.postMessage(session.id, "fail please")).events();
    const completions = frames.filter((f) => f.event === "completion");
    expect(completions).toHaveLength(1);
    expect(completions[0]?.data).toMatchObject({
      status: "failed",
      is_error: true,
      result: null,
      cost_usd: 0,
    });
    // The CLI's synthetic error message is not shown as model text.
    expect(frames.filter((f) => f.event === "text_delta")).toEqual([]);
    expect((completions[0]?.data as { error?: string } | undefined)?.error).toContain(
      "prompt is malformed",
    );
  });

  it("cancel stops a run of the real CLI mid-stream and leaves none of its processes", async () => {
    mock.script({
      blocks: [{ type: "text", text: chunk("slow ".repeat(200), 200).join("") }],
      delayMs: 50,
    });
    const session = await api.newSession();
    const run = await (
      await api.postMessage(session.id, "go slowly", { Prefer: "respond-async" })
    ).json();
    const reader = SseReader.of(await fetch(`${server.url}/v1/runs/${run.id}/events`));
    const [started, firstDelta] = await reader.events(2);
    expect([started?.event, firstDelta?.event]).toEqual(["run_started", "text_delta"]);
    expect(processesOf(session.id).length).toBeGreaterThan(0);

    const cancelled = await (
      await fetch(`${server.url}/v1/runs/${run.id}/cancel`, { method: "POST" })
    ).json();
    expect(cancelled).toMatchObject({ status: "cancelled", completion: { status: "cancelled" } });
    expect(processesOf(session.id)).toEqual([]);
    const rest = await reader.events();
    expect(rest.at(-1)?.data).toMatchObject({
      type: "completion",
      status: "cancelled",
      is_error: true,
    });
  });
});

describe.each(agentMatrix.filter((agent) => REAL_CLI_BACKENDS.includes(agent.db)))(
  "after a first run that ended early, the real $agent CLI on $db",
  (agent) => {
    let model: Model;
    let t: TestApp;
    let server: { url: string; close(): Promise<void> };
    let api: ReturnType<typeof httpApi>;

    beforeAll(async () => {
      model = await startModel(agent.agent);
      t = await createTestApp(agent.db, {
        ...model.env,
        AGENT_BRIDGE_PERMISSION_MODE: "bypassPermissions",
      });
      server = await listen(t.app);
      api = httpApi(server.url);
    });
    afterAll(async () => {
      await server.close();
      await t.close();
      await model.close();
    });

    it("after a first message cancelled while the API held its answer, the next continues the conversation", async () => {
      const held = holdUntilReleased();
      model.answer(["Never sent."], { hold: held.hold });
      const session = await api.newSession();
      const run = await (
        await api.postMessage(session.id, "remember the word quince", { Prefer: "respond-async" })
      ).json();
      await held.arrived;
      const cancelled = await (
        await fetch(`${server.url}/v1/runs/${run.id}/cancel`, { method: "POST" })
      ).json();
      held.release();
      expect(cancelled).toMatchObject({ status: "cancelled" });

      model.answer(["The word was quince."]);
      const next = await (
        await api.postMessage(session.id, "which word?", { Accept: "application/json" })
      ).json();
      expect(next).toMatchObject({ text: "The word was quince.", run: { status: "succeeded" } });
      expect(model.lastRequest()).toContain("remember the word quince");
    });

    it("after a first message whose CLI was killed before its init line, the next one works", async () => {
      const session = await api.newSession();
      const run = await (
        await api.postMessage(session.id, "never heard", { Prefer: "respond-async" })
      ).json();
      await killOnceRunning(t, run.id);
      const killed = SseReader.of(await fetch(`${server.url}/v1/runs/${run.id}/events`));
      expect((await killed.events()).at(-1)?.data).toMatchObject({ status: "failed" });

      model.answer(["Hello, fresh."]);
      const next = await (
        await api.postMessage(session.id, "hello", { Accept: "application/json" })
      ).json();
      expect(next).toMatchObject({ text: "Hello, fresh.", run: { status: "succeeded" } });
    });
  },
);
