import { existsSync, realpathSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { groupAlive } from "../../../src/process/groups.js";
import { runs } from "../../../src/store/schema.js";
import { createHook, deliver, getRun, isFinished, until } from "../../hooks/support.js";
import { createTestApp, listen, type TestApp } from "../../support/app.js";
import { CODEX_TEST_MODEL, type CodexEnv, makeCodexEnv } from "../../support/codex-env.js";
import { REAL_CLI_BACKENDS } from "../../support/db.js";
import { PNG_1X1 } from "../../support/images.js";
import { holdUntilReleased } from "../../support/mock-anthropic.js";
import {
  addFilePatch,
  callOutput,
  type MockOpenAI,
  messageTexts,
  shellCall,
  startMockOpenAI,
} from "../../support/mock-openai.js";
import { SseReader } from "../../support/sse.js";
import { makeRepo } from "../../worktrees/repo.js";

// The Codex back-end through the whole bridge: HTTP -> run manager -> the real `codex` binary ->
// a mock Responses API on loopback -> events back over SSE, the durable log and the session.

const json = (body: unknown) => ({
  method: "POST",
  headers: { "Content-Type": "application/json" },
  body: JSON.stringify(body),
});

describe.each(REAL_CLI_BACKENDS)("codex sessions through HTTP on %s", (backend) => {
  let mock: MockOpenAI;
  let ce: CodexEnv;
  let t: TestApp;
  let server: { url: string; close(): Promise<void> };

  beforeAll(async () => {
    mock = await startMockOpenAI({ quiet: true });
    ce = await makeCodexEnv(mock.url);
    t = await createTestApp(backend, {
      ...ce.env,
      AGENT_BRIDGE_AGENTS: "claude,codex",
      AGENT_BRIDGE_WORK_DIR: ce.cwd,
      // The worktree test's repository is made under the temp dir.
      AGENT_BRIDGE_ALLOWED_ROOTS: `${ce.cwd},${realpathSync(tmpdir())}`,
      AGENT_BRIDGE_PERMISSION_MODE: "acceptEdits",
      AGENT_BRIDGE_CODEX_PRICES: JSON.stringify({
        [CODEX_TEST_MODEL]: { input: 2, cached_input: 0.5, output: 10 },
      }),
    });
    server = await listen(t.app);
  });
  afterAll(async () => {
    await server?.close();
    await t?.close();
    await mock?.close();
    await ce?.cleanup();
  });

  async function newCodexSession(body: Record<string, unknown> = {}) {
    const res = await fetch(`${server.url}/v1/sessions`, json({ agent: "codex", ...body }));
    expect(res.status).toBe(201);
    return (await res.json()) as { id: string; agent: string; agent_session_id: string | null };
  }

  async function send(sessionId: string, text: string, query = "") {
    const res = await fetch(
      `${server.url}/v1/sessions/${sessionId}/messages${query}`,
      json({ text }),
    );
    return SseReader.of(res).events();
  }

  it("readyz names both back-ends with their CLIs' versions", async () => {
    const body = await (await fetch(`${server.url}/readyz`)).json();
    expect(body).toMatchObject({
      status: "ok",
      default_agent: "claude",
      agents: {
        claude: { version: expect.stringMatching(/\d+\.\d+\.\d+/) },
        codex: {
          bin: t.config.codex.bin,
          version: "codex-cli 0.171.0",
          credentials: "OPENAI_API_KEY",
        },
      },
    });
  });

  it("runs a new session: the answer as text, one completion with its usage and cost, a run of codex", async () => {
    mock.script({
      output: [{ type: "message", text: "Hello from codex." }],
      usage: { input_tokens: 1000, cached_tokens: 200, output_tokens: 50 },
    });
    const session = await newCodexSession({ model: CODEX_TEST_MODEL });
    expect(session).toMatchObject({ agent: "codex", agent_session_id: null });
    const frames = await send(session.id, "Say hello");
    expect(frames.map((f) => f.event)).toEqual(["run_started", "text_delta", "completion"]);
    expect(frames[1]?.data).toEqual({ type: "text_delta", text: "Hello from codex." });
    const completion = frames.at(-1)?.data as Record<string, unknown>;
    expect(completion).toMatchObject({
      status: "succeeded",
      result: "Hello from codex.",
      usage: { input_tokens: 800, cache_read_tokens: 200, output_tokens: 50 },
      agent_session_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      claude_session_id: null,
    });
    // 800 × $2 + 200 × $0.50 + 50 × $10 per million tokens.
    expect(completion.cost_usd).toBeCloseTo(0.0022, 10);
    expect(messageTexts(mock.responsesRequests().at(-1), "user")).toContain("Say hello");
    const runId = (frames[0]?.data as { run_id?: string } | undefined)?.run_id;
    const run = await (await fetch(`${server.url}/v1/runs/${runId}`)).json();
    expect(run).toMatchObject({ agent: "codex", agent_session_id: completion.agent_session_id });
  });

  it("resumes the session's thread: the second request carries the first turn, and usage adds up", async () => {
    mock.script({
      output: [{ type: "message", text: "Noted: PAPAYA." }],
      usage: { input_tokens: 100, cached_tokens: 0, output_tokens: 20 },
    });
    const session = await newCodexSession();
    const first = await send(session.id, "Remember PAPAYA");
    const thread = (first.at(-1)?.data as { agent_session_id?: string } | undefined)
      ?.agent_session_id;
    const afterFirst = await (await fetch(`${server.url}/v1/sessions/${session.id}`)).json();
    expect(afterFirst.agent_session_id).toBe(thread);

    // The API's usage is per request; codex reports the thread's running totals (400 / 50).
    mock.script({
      output: [{ type: "message", text: "It was PAPAYA." }],
      usage: { input_tokens: 300, cached_tokens: 0, output_tokens: 30 },
    });
    const second = await send(session.id, "What was the word?");
    const request = mock.responsesRequests().at(-1);
    expect(messageTexts(request, "user")).toEqual(
      expect.arrayContaining(["Remember PAPAYA", "What was the word?"]),
    );
    expect(messageTexts(request, "assistant")).toContain("Noted: PAPAYA.");
    expect(second.at(-1)?.data).toMatchObject({
      status: "succeeded",
      result: "It was PAPAYA.",
      usage: { input_tokens: 300, output_tokens: 30 },
      agent_session_id: thread,
    });
    const totals = await (await fetch(`${server.url}/v1/sessions/${session.id}`)).json();
    expect(totals.usage).toMatchObject({ input_tokens: 400, output_tokens: 50, runs: 2 });
  });

  it("shows a shell command as status, in the full view as a shell_exec call closed with its output and exit code, and in the conversation", async () => {
    mock.script(
      { output: [shellCall("echo bridged-by-codex", "call_sh")] },
      { output: [{ type: "message", text: "Ran it." }] },
    );
    const session = await newCodexSession({ permission_mode: "bypassPermissions" });
    const frames = await send(session.id, "Run echo");
    expect(frames.find((f) => f.event === "status")?.data).toMatchObject({
      type: "status",
      tool_name: "shell",
    });
    const runId = (frames[0]?.data as { run_id?: string } | undefined)?.run_id;
    const full = await SseReader.of(
      await fetch(`${server.url}/v1/runs/${runId}/events?events=full`),
    ).events();
    const call = full.find((f) => f.event === "tool_call")?.data as Record<string, unknown>;
    expect(call).toMatchObject({
      tool_name: "shell",
      kind: "shell_exec",
      normalized: { kind: "shell_exec", command: expect.stringContaining("echo bridged-by-codex") },
    });
    expect(JSON.stringify(call.input)).toContain("echo bridged-by-codex");
    expect(full.find((f) => f.event === "tool_result")?.data).toMatchObject({
      tool_use_id: call.tool_use_id,
      is_error: false,
      content: expect.stringContaining("bridged-by-codex"),
    });
    expect(full.find((f) => f.event === "tool_update")?.data).toMatchObject({
      tool_use_id: call.tool_use_id,
      status: "complete",
      normalized: {
        kind: "shell_exec",
        exit_code: 0,
        output: expect.stringContaining("bridged-by-codex"),
      },
    });
    expect(callOutput(mock.responsesRequests().at(-1), "call_sh")).toContain("bridged-by-codex");
    expect(frames.at(-1)?.data).toMatchObject({ status: "succeeded", result: "Ran it." });
    // The conversation reads back from the same log: the message, the call with its output, the answer.
    const conversation = (await (
      await fetch(`${server.url}/v1/sessions/${session.id}/messages`)
    ).json()) as { data: Record<string, unknown>[] };
    expect(conversation.data.map((item) => item.type)).toEqual([
      "user_message",
      "tool_call",
      "assistant_text",
      "run_end",
    ]);
    expect(conversation.data).toMatchObject([
      { run_id: runId, text: "Run echo", trigger: "message" },
      {
        tool_name: "shell",
        kind: "shell_exec",
        result: { is_error: false, content: expect.stringContaining("bridged-by-codex") },
      },
      { text: "Ran it." },
      { status: "succeeded" },
    ]);
  });

  it("maps acceptEdits onto the workspace-write sandbox: a file change lands in the work dir", async () => {
    mock.script(
      { output: [addFilePatch("from-codex.txt", "written by codex", "call_patch")] },
      { output: [{ type: "message", text: "Wrote it." }] },
    );
    const session = await newCodexSession({ permission_mode: "acceptEdits" });
    const frames = await send(session.id, "Write the file");
    expect(frames.at(-1)?.data).toMatchObject({ status: "succeeded" });
    const path = join(ce.cwd, "from-codex.txt");
    expect(existsSync(path)).toBe(true);
    expect(await readFile(path, "utf8")).toContain("written by codex");
  });

  it("runs a worktree session in a git worktree the bridge makes for it, and records it", async () => {
    const repo = await makeRepo();
    try {
      mock.script(
        { output: [addFilePatch("in-worktree.txt", "on the session's branch", "call_wt")] },
        { output: [{ type: "message", text: "Done." }] },
      );
      const session = await newCodexSession({
        worktree: true,
        work_dir: repo.clone,
        permission_mode: "acceptEdits",
      });
      const frames = await send(session.id, "Write it on your branch");
      expect(frames.at(-1)?.data).toMatchObject({ status: "succeeded" });
      const dir = join(repo.clone, ".claude", "worktrees", session.id);
      expect(await readFile(join(dir, "in-worktree.txt"), "utf8")).toContain("session's branch");
      expect(existsSync(join(repo.clone, "in-worktree.txt"))).toBe(false);
      const after = await (await fetch(`${server.url}/v1/sessions/${session.id}`)).json();
      expect(after.git_worktree).toMatchObject({
        path: dir,
        branch: `worktree-${session.id}`,
        state: "active",
      });
    } finally {
      await repo.cleanup();
    }
  });

  it("passes the session's system prompt to codex as developer instructions", async () => {
    mock.script({ output: [{ type: "message", text: "Aye." }] });
    const session = await newCodexSession({ system_prompt: "Answer like a pirate." });
    await send(session.id, "Hello");
    expect(JSON.stringify(mock.responsesRequests().at(-1))).toContain("Answer like a pirate.");
  });

  it("refuses a setting codex has no equivalent for (400, naming it) and stores nothing", async () => {
    for (const [field, value] of [
      ["permission_mode", "dontAsk"],
      ["permission_mode", "auto"],
      ["model", "-rf"],
    ] as const) {
      const res = await fetch(
        `${server.url}/v1/sessions`,
        json({ agent: "codex", title: "refused", [field]: value }),
      );
      expect(res.status).toBe(400);
      const body = await res.json();
      expect(body.code).toBe("validation_failed");
      expect(body.errors).toEqual([expect.objectContaining({ location: "body", path: field })]);
      expect(body.detail).toContain("codex");
    }
    const list = await (await fetch(`${server.url}/v1/sessions?limit=100`)).json();
    expect(list.data.filter((s: { title: string }) => s.title === "refused")).toEqual([]);
  });

  it("runs a hook's deliveries on codex when the hook names it, and checks its settings as a session's", async () => {
    const secret = "bearer-secret-0123456789";
    const refused = await fetch(
      `${server.url}/v1/hooks`,
      json({
        name: `codex-refused-${Date.now()}`,
        verification: "bearer",
        secret,
        prompt_template: "Review",
        agent: "codex",
        permission_mode: "dontAsk",
      }),
    );
    expect(refused.status).toBe(400);
    expect((await refused.json()).errors).toEqual([
      expect.objectContaining({ path: "permission_mode" }),
    ]);
    const hook = await createHook(server.url, {
      name: `codex-${Date.now()}`,
      verification: "bearer",
      secret,
      prompt_template: "Review {{payload.title}}",
      agent: "codex",
    });
    expect(hook).toMatchObject({ agent: "codex" });
    mock.script({ output: [{ type: "message", text: "Reviewed by codex." }] });
    const res = await deliver(server.url, String(hook.name), JSON.stringify({ title: "PR 7" }), {
      "Content-Type": "application/json",
      Authorization: `Bearer ${secret}`,
      "X-Delivery-Id": crypto.randomUUID(),
    });
    expect(res.status).toBe(202);
    const { run_id } = await res.json();
    const run = await until(async () => {
      const r = await getRun(server.url, run_id);
      return isFinished(r) ? r : undefined;
    });
    expect(run).toMatchObject({ status: "succeeded", result: "Reviewed by codex." });
    const session = await (await fetch(`${server.url}/v1/sessions/${run.session_id}`)).json();
    expect(session.agent).toBe("codex");
    expect(messageTexts(mock.responsesRequests().at(-1), "user")).toContain("Review PR 7");
  });

  it("cancels a running codex run: one cancelled completion, its process group gone, the log replayable", async () => {
    const held = holdUntilReleased();
    mock.script({ output: [{ type: "message", text: "Never sent." }], hold: held.hold });
    const session = await newCodexSession();
    const res = await fetch(
      `${server.url}/v1/sessions/${session.id}/messages`,
      json({ text: "Slow" }),
    );
    const reader = SseReader.of(res);
    const started = await reader.next();
    const runId = (started?.data as { run_id?: string } | undefined)?.run_id;
    // codex is waiting on the model: its request has reached the mock.
    await held.arrived;
    const pgid = await until(async () => {
      const [row] = await t.database.db
        .select()
        .from(runs)
        .where(eq(runs.id, runId ?? ""));
      return row?.pgid ?? undefined;
    });
    const cancel = await fetch(`${server.url}/v1/runs/${runId}/cancel`, { method: "POST" });
    expect(cancel.status).toBe(200);
    expect((await cancel.json()).status).toBe("cancelled");
    // The cancel answers once the group is gone.
    expect(await groupAlive(pgid)).toBe(false);
    const rest = await reader.events();
    expect(rest.filter((f) => f.event === "completion")).toHaveLength(1);
    expect(rest.at(-1)?.data).toMatchObject({ status: "cancelled", error_code: "cancelled" });
    held.release();
    const replay = await SseReader.of(
      await fetch(`${server.url}/v1/runs/${runId}/events`),
    ).events();
    expect(replay.map((f) => f.event)).toEqual(["run_started", "completion"]);
  });

  it("ends a failed API turn with one failed completion naming codex's error", async () => {
    mock.script({ error: { status: 400, message: "the model is overloaded with nonsense" } });
    const session = await newCodexSession();
    const frames = await send(session.id, "Fail please");
    expect(frames.filter((f) => f.event === "completion")).toHaveLength(1);
    expect(frames.at(-1)?.data).toMatchObject({
      status: "failed",
      error_code: "agent_error",
      error: expect.stringContaining("overloaded with nonsense"),
    });
  });

  it("sends a message's image to codex as an --image file, which reaches the API as an input image", async () => {
    mock.script({ output: [{ type: "message", text: "One pixel." }] });
    const session = await newCodexSession();
    const requests = mock.responsesRequests().length;
    const res = await fetch(`${server.url}/v1/sessions/${session.id}/messages`, {
      ...json({
        text: "What is this?",
        attachments: [{ type: "image", media_type: "image/png", data: PNG_1X1 }],
      }),
      headers: { "Content-Type": "application/json", Accept: "application/json" },
    });
    expect(res.status).toBe(200);
    expect((await res.json()).completion).toMatchObject({
      status: "succeeded",
      result: "One pixel.",
    });
    const [request] = mock.responsesRequests().slice(requests);
    const user = request?.input.filter((item) => item.role === "user").at(-1);
    expect(user?.content).toContainEqual(
      expect.objectContaining({
        type: "input_image",
        image_url: `data:image/png;base64,${PNG_1X1}`,
      }),
    );
  });
});
