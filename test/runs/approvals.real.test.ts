import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueKey } from "../../src/auth/keys.js";
import { createClient } from "../../src/client/index.js";
import { createTestApp, fetchAs, listen, type TestApp } from "../support/app.js";
import { type ClaudeEnv, makeClaudeEnv } from "../support/claude-env.js";
import { REAL_CLI_BACKENDS } from "../support/db.js";
import {
  holdUntilReleased,
  type MessagesBody,
  type MockAnthropic,
  type MockTurn,
  startMockAnthropic,
  toolResultText,
} from "../support/mock-anthropic.js";
import { type Frame, SseReader } from "../support/sse.js";

// Supervised runs: the real `claude` binary (against the mock Messages API) in `default` mode asks
// before it writes, and the bridge either refuses at once, visibly (`approvals: deny`), or holds
// the request until a client answers it over the API (`approvals: api`).

const data = <T = Record<string, unknown>>(frame: Frame | undefined) => frame?.data as T;

describe.each(REAL_CLI_BACKENDS)("approvals with the real claude CLI on %s", (backend) => {
  let mock: MockAnthropic;
  let ce: ClaudeEnv;
  let t: TestApp;
  let server: { url: string; close(): Promise<void> };
  let alice: string;
  let aliceId: string;
  let bob: string;

  beforeAll(async () => {
    mock = await startMockAnthropic({ quiet: true });
    ce = await makeClaudeEnv(mock.url);
    t = await createTestApp(backend, {
      ...ce.env,
      AGENT_BRIDGE_AUTH: "keys",
      AGENT_BRIDGE_WORK_DIR: ce.cwd,
      AGENT_BRIDGE_PERMISSION_MODE: "default",
      // Shorter than the approval timeout of the test that waits it out: it must not fire. Not
      // shorter: it runs from the CLI's start, and 3 s is near what a CLI started cold on a loaded
      // machine takes to its first line. The one full run this file failed (a new machine's
      // first), its first runs ended within 3-5 s without their request, and the runs after met
      // the turns those had left in the mock's script.
      AGENT_BRIDGE_IDLE_TIMEOUT_SECONDS: "6",
    });
    server = await listen(t.app);
    const issued = await issueKey(t.database.db, { name: "alice", admin: false });
    alice = issued.key;
    aliceId = issued.row.id;
    bob = (await issueKey(t.database.db, { name: "bob", admin: false })).key;
  });
  afterAll(async () => {
    await server.close();
    await t.close();
    await mock.close();
    await ce.cleanup();
  });

  const call = (path: string, init: RequestInit = {}, key = alice) =>
    fetchAs(server.url, key, path, init);
  const post = (path: string, body: unknown, key = alice) =>
    call(path, { method: "POST", body: JSON.stringify(body) }, key);
  const newSession = async (body: Record<string, unknown> = {}) => {
    const res = await post("/v1/sessions", body);
    expect(res.status).toBe(201);
    return (await res.json()) as { id: string; allowed_tools: string[] };
  };
  /** Posts a message; its default-view stream. */
  const send = async (sessionId: string, text: string) => {
    const res = await post(`/v1/sessions/${sessionId}/messages`, { text });
    expect(res.status).toBe(200);
    return { runId: res.headers.get("x-run-id") ?? "", sse: SseReader.of(res) };
  };
  const writeTurns = (file: string, content: string, reply: string): MockTurn[] => [
    {
      blocks: [
        { type: "tool_use", name: "Write", input: { file_path: join(ce.cwd, file), content } },
      ],
    },
    { blocks: [{ type: "text", text: reply }] },
  ];
  const answer = (runId: string, requestId: string, body: unknown, key = alice) =>
    post(`/v1/runs/${runId}/permissions/${requestId}`, body, key);

  it("approvals deny: the refused tool shows as permission_request, then permission_resolved by policy", async () => {
    mock.script(...writeTurns("policy.txt", "x", "I could not write it."));
    const session = await newSession();
    const { sse } = await send(session.id, "write policy.txt");
    const frames = await sse.until("completion");
    const shown = frames.map((f) => f.event);
    const at = shown.indexOf("permission_request");
    expect(shown.slice(at, at + 2)).toEqual(["permission_request", "permission_resolved"]);
    const request = data(frames[at]);
    expect(request).toMatchObject({
      tool_name: "Write",
      input: { file_path: join(ce.cwd, "policy.txt"), content: "x" },
      expires_at: null,
    });
    expect(data(frames[at + 1])).toEqual({
      type: "permission_resolved",
      request_id: request.request_id,
      decision: "deny",
      by: "policy",
    });
    expect(data(frames.at(-1))).toMatchObject({ status: "succeeded" });
    expect(existsSync(join(ce.cwd, "policy.txt"))).toBe(false);
  });

  it("approvals api: a Write waits for its answer, shown as awaiting_approval; allowed, the file is written", async () => {
    mock.script(...writeTurns("allowed.txt", "hello", "Written."));
    const session = await newSession({ approvals: "api" });
    const { runId, sse } = await send(session.id, "write allowed.txt");
    const request = data((await sse.until("permission_request")).at(-1));
    expect(request).toMatchObject({ tool_name: "Write", expires_at: expect.any(String) });
    const run = (await (await call(`/v1/runs/${runId}`)).json()) as { status: string };
    expect(run.status).toBe("awaiting_approval");
    const listed = await (await call(`/v1/runs/${runId}/permissions`)).json();
    expect(listed.data).toEqual([
      expect.objectContaining({ request_id: request.request_id, state: "pending" }),
    ]);

    // Another tenant's key cannot see it, let alone answer it.
    const foreign = await answer(runId, String(request.request_id), { decision: "allow" }, bob);
    expect(foreign.status).toBe(404);
    const res = await answer(runId, String(request.request_id), { decision: "allow" });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ state: "allowed", by: "client", scope: "once" });

    const rest = await sse.until("completion");
    expect(data(rest.find((f) => f.event === "permission_resolved"))).toEqual({
      type: "permission_resolved",
      request_id: request.request_id,
      decision: "allow",
      scope: "once",
      by: "client",
      key_id: aliceId,
    });
    expect(data(rest.at(-1))).toMatchObject({ status: "succeeded", result: "Written." });
    expect(readFileSync(join(ce.cwd, "allowed.txt"), "utf8")).toBe("hello");
    // Answered once: a second answer is a conflict, and nothing changes.
    const again = await answer(runId, String(request.request_id), { decision: "deny" });
    expect(again.status).toBe(409);
    expect((await again.json()).code).toBe("permission_request_resolved");
    expect((await answer(runId, "no-such-request", { decision: "deny" })).status).toBe(404);
  });

  it("an allow with updated_input runs the changed command, and permission_resolved and the list show the input that ran and the key that answered", async () => {
    const file = join(ce.cwd, "audit.txt");
    const asked = { command: `echo original | tee ${file}` };
    const changed = { command: `echo changed | tee ${file}` };
    mock.script(
      { blocks: [{ type: "tool_use", name: "Bash", input: asked }] },
      { blocks: [{ type: "text", text: "Ran it." }] },
    );
    const session = await newSession({ approvals: "api" });
    const { runId, sse } = await send(session.id, "run the command");
    const request = data((await sse.until("permission_request")).at(-1));
    expect(request).toMatchObject({ tool_name: "Bash", input: asked });
    const before = mock.mainRequests().length;
    const res = await answer(runId, String(request.request_id), {
      decision: "allow",
      updated_input: changed,
    });
    expect(res.status).toBe(200);
    const recorded = {
      request_id: request.request_id,
      input: asked,
      state: "allowed",
      by: "client",
      key_id: aliceId,
      updated_input: changed,
    };
    expect(await res.json()).toMatchObject(recorded);

    const rest = await sse.until("completion");
    expect(data(rest.find((f) => f.event === "permission_resolved"))).toEqual({
      type: "permission_resolved",
      request_id: request.request_id,
      decision: "allow",
      scope: "once",
      by: "client",
      updated_input: changed,
      key_id: aliceId,
    });
    expect(data(rest.at(-1))).toMatchObject({ status: "succeeded", result: "Ran it." });
    // What ran is the changed command: its output is the tool result the model got.
    const ran = toolResultText(mock.mainRequests()[before]);
    expect(ran).toContain("changed");
    expect(ran).not.toContain("original");
    expect(readFileSync(file, "utf8")).toBe("changed\n");
    const listed = await (await call(`/v1/runs/${runId}/permissions`)).json();
    expect(listed.data).toEqual([expect.objectContaining(recorded)]);
  });

  it("approvals api: denied with a message, no file, and the model reads the message", async () => {
    mock.script(...writeTurns("denied.txt", "x", "Understood."));
    const session = await newSession({ approvals: "api" });
    const { runId, sse } = await send(session.id, "write denied.txt");
    const request = data((await sse.until("permission_request")).at(-1));
    const before = mock.mainRequests().length;
    const res = await answer(runId, String(request.request_id), {
      decision: "deny",
      message: "Not in this directory, please.",
    });
    expect(res.status).toBe(200);
    const rest = await sse.until("completion");
    expect(data(rest.find((f) => f.event === "permission_resolved"))).toMatchObject({
      decision: "deny",
      by: "client",
      message: "Not in this directory, please.",
    });
    expect(data(rest.at(-1))).toMatchObject({ status: "succeeded" });
    expect(existsSync(join(ce.cwd, "denied.txt"))).toBe(false);
    expect(toolResultText(mock.mainRequests()[before])).toContain("Not in this directory, please.");
  });

  it("scope session: a second identical Write in a later message runs without a request", async () => {
    mock.script(...writeTurns("session.txt", "one", "First."));
    const session = await newSession({ approvals: "api" });
    const first = await send(session.id, "write session.txt");
    const request = data((await first.sse.until("permission_request")).at(-1));
    const res = await answer(first.runId, String(request.request_id), {
      decision: "allow",
      scope: "session",
    });
    expect(res.status).toBe(200);
    expect(data((await first.sse.until("completion")).at(-1))).toMatchObject({
      status: "succeeded",
    });
    const stored = (await (await call(`/v1/sessions/${session.id}`)).json()) as {
      allowed_tools: string[];
    };
    // The CLI's suggestion for a Write: the tool, for the session.
    expect(stored.allowed_tools).toEqual(["Write"]);

    mock.script(...writeTurns("session.txt", "two", "Second."));
    const second = await send(session.id, "write session.txt again");
    const frames = await second.sse.until("completion");
    expect(frames.map((f) => f.event)).not.toContain("permission_request");
    expect(data(frames.at(-1))).toMatchObject({ status: "succeeded", result: "Second." });
    expect(readFileSync(join(ce.cwd, "session.txt"), "utf8")).toBe("two");
  });

  it("AskUserQuestion answered with option B: the model receives B in the same run", async () => {
    const approach = {
      question: "Which approach?",
      header: "Approach",
      options: [
        { label: "A", description: "Rewrite it" },
        { label: "B", description: "Patch it" },
      ],
    };
    mock.script(
      {
        blocks: [
          {
            type: "tool_use",
            name: "AskUserQuestion",
            input: { questions: [{ ...approach, multiSelect: false }] },
          },
        ],
      },
      { blocks: [{ type: "text", text: "Patching, then." }] },
    );
    const session = await newSession({ approvals: "api" });
    const { runId, sse } = await send(session.id, "fix it");
    const frames = await sse.until("user_question");
    // The question comes once, after its request, and is answered by the request's id.
    expect(frames.filter((f) => f.event === "user_question")).toHaveLength(1);
    const [asked, question] = frames.slice(-2);
    expect(asked?.event).toBe("permission_request");
    const request = data(asked);
    expect(request.tool_name).toBe("AskUserQuestion");
    expect(data(question)).toEqual({
      type: "user_question",
      tool_use_id: request.tool_use_id,
      questions: [{ ...approach, multi_select: false }],
      request_id: request.request_id,
      expires_at: request.expires_at,
    });
    expect(Number(question?.id)).toBe(Number(asked?.id) + 1);
    const before = mock.mainRequests().length;
    const res = await answer(runId, String(request.request_id), {
      answers: { "Which approach?": "B" },
    });
    expect(res.status).toBe(200);
    const rest = await sse.until("completion");
    // The answers are the input the tool ran with: the record keeps them.
    expect(data(rest.find((f) => f.event === "permission_resolved"))).toMatchObject({
      decision: "allow",
      by: "client",
      updated_input: { ...(request.input as object), answers: { "Which approach?": "B" } },
    });
    expect(data(rest.at(-1))).toMatchObject({
      status: "succeeded",
      result: "Patching, then.",
    });
    const told = toolResultText(mock.mainRequests()[before]);
    expect(told).toContain('"Which approach?"="B"');
  });

  it("a request left alone is denied at its timeout and the run goes on; the idle watchdog does not fire", async () => {
    mock.script(...writeTurns("late.txt", "x", "Nobody answered."));
    // Longer than the idle timeout (6 s): the wait is not the CLI's silence.
    const session = await newSession({ approvals: "api", approval_timeout_seconds: 8 });
    const { runId, sse } = await send(session.id, "write late.txt");
    const request = data((await sse.until("permission_request")).at(-1));
    const run = (await (await call(`/v1/runs/${runId}`)).json()) as { status: string };
    expect(run.status).toBe("awaiting_approval");
    const rest = await sse.until("completion");
    expect(data(rest.find((f) => f.event === "permission_resolved"))).toMatchObject({
      request_id: request.request_id,
      decision: "deny",
      by: "timeout",
    });
    expect(data(rest.at(-1))).toMatchObject({ status: "succeeded", result: "Nobody answered." });
    expect(existsSync(join(ce.cwd, "late.txt"))).toBe(false);
    const listed = await (await call(`/v1/runs/${runId}/permissions`)).json();
    expect(listed.data).toEqual([expect.objectContaining({ state: "expired", by: "timeout" })]);
    expect((await answer(runId, String(request.request_id), { decision: "allow" })).status).toBe(
      409,
    );
  });

  it("a run cancelled while a request waits closes it: permission_resolved by cancel, the row cancelled", async () => {
    // Only the Write: the run is cancelled before the model is asked again.
    mock.script(...writeTurns("cancelled.txt", "x", "unused").slice(0, 1));
    const session = await newSession({ approvals: "api" });
    const { runId, sse } = await send(session.id, "write cancelled.txt");
    const request = data((await sse.until("permission_request")).at(-1));
    expect((await post(`/v1/runs/${runId}/cancel`, {})).status).toBe(200);
    const rest = await sse.until("completion");
    expect(data(rest.find((f) => f.event === "permission_resolved"))).toEqual({
      type: "permission_resolved",
      request_id: request.request_id,
      decision: "deny",
      by: "cancel",
    });
    expect(data(rest.at(-1))).toMatchObject({ status: "cancelled" });
    const listed = await (await call(`/v1/runs/${runId}/permissions`)).json();
    expect(listed.data).toEqual([expect.objectContaining({ state: "cancelled", by: "cancel" })]);
    expect((await answer(runId, String(request.request_id), { decision: "allow" })).status).toBe(
      409,
    );
  });

  it("an answer posted while the client's stream is away shows when the stream resumes with Last-Event-ID", async () => {
    mock.script(...writeTurns("resumed.txt", "back", "Written while you were away."));
    const session = await newSession({ approvals: "api" });
    const { runId, sse } = await send(session.id, "write resumed.txt");
    const asked = (await sse.until("permission_request")).at(-1);
    await sse.cancel();
    const request = data(asked);
    expect((await answer(runId, String(request.request_id), { decision: "allow" })).status).toBe(
      200,
    );
    const resumed = SseReader.of(
      await call(`/v1/runs/${runId}/events`, { headers: { "Last-Event-ID": String(asked?.id) } }),
    );
    const rest = await resumed.until("completion");
    expect(rest[0]).toMatchObject({
      id: String(Number(asked?.id) + 1),
      event: "permission_resolved",
      data: { request_id: request.request_id, decision: "allow", by: "client" },
    });
    expect(data(rest.at(-1))).toMatchObject({ status: "succeeded" });
    expect(readFileSync(join(ce.cwd, "resumed.txt"), "utf8")).toBe("back");
  });

  // A cancel asks the CLI to end its turn too, and kills it only when it does not.
  it.each(["interrupt", "cancel"])(
    "%s mid-run: the run ends cancelled with its usage and cost, and the next message resumes the conversation",
    async (route) => {
      const held = holdUntilReleased();
      mock.script(
        {
          blocks: [{ type: "tool_use", name: "Read", input: { file_path: join(ce.cwd, "x.txt") } }],
          usage: { input_tokens: 300, output_tokens: 40 },
        },
        { blocks: [{ type: "text", text: "never sent" }], hold: held.hold },
      );
      const session = await newSession();
      const { runId, sse } = await send(session.id, "remember MANGO, then read x.txt");
      await held.arrived;
      const res = await post(`/v1/runs/${runId}/${route}`, {});
      expect(res.status).toBe(200);
      const run = await res.json();
      expect(run.status).toBe("cancelled");
      expect(run.usage.input_tokens).toBeGreaterThan(0);
      const completion = data((await sse.until("completion")).at(-1));
      // The CLI's own result, priced: a killed CLI leaves no cost.
      expect(completion).toMatchObject({
        status: "cancelled",
        error_code: "cancelled",
        usage: { input_tokens: 300, output_tokens: 40 },
      });
      expect(completion.cost_usd).toBeGreaterThan(0);
      held.release();

      mock.script({ blocks: [{ type: "text", text: "You said MANGO." }] });
      const next = await send(session.id, "what did I say?");
      expect(data((await next.sse.until("completion")).at(-1))).toMatchObject({
        status: "succeeded",
        result: "You said MANGO.",
      });
      const seen = JSON.stringify((mock.mainRequests().at(-1) as MessagesBody).messages);
      expect(seen).toContain("remember MANGO");
    },
  );

  it("the client answers a permission request from its stream with answer()", async () => {
    mock.script(...writeTurns("client.txt", "from the client", "Done."));
    const client = createClient({ baseUrl: server.url, key: alice });
    const session = await newSession({ approvals: "api" });
    const seen: string[] = [];
    let runId = "";
    for await (const event of client.stream(session.id, "write client.txt")) {
      seen.push(event.type);
      if (event.type === "run_started") runId = event.run_id;
      if (event.type === "permission_request") {
        const answered = await client.answer(runId, event.request_id, { decision: "allow" });
        expect(answered).toMatchObject({ state: "allowed", by: "client" });
      }
      if (event.type === "completion") expect(event.status).toBe("succeeded");
    }
    expect(seen).toEqual(expect.arrayContaining(["permission_request", "permission_resolved"]));
    expect(await client.listPermissions(runId)).toEqual([
      expect.objectContaining({ state: "allowed" }),
    ]);
    expect(readFileSync(join(ce.cwd, "client.txt"), "utf8")).toBe("from the client");
  });
});
