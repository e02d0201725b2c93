import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listModelCalls, meteredUsage } from "../../src/store/model-calls.js";
import { createTestApp, httpApi, listen, type TestApp } from "../support/app.js";
import { type ClaudeEnv, makeClaudeEnv } from "../support/claude-env.js";
import { BACKENDS } from "../support/db.js";
import {
  holdUntilReleased,
  type MockAnthropic,
  startMockAnthropic,
  toolResultText,
} from "../support/mock-anthropic.js";
import { type Frame, SseReader } from "../support/sse.js";

// The real claude CLI through the model gateway (src/gateway/), against the mock Messages API as
// the operator's upstream: what the agent holds, what its run's token is worth, how the API's
// answers reach the CLI, and what the gateway meters. On each database, since the metering is
// stored there.

/** The operator's key: given to the server in a file, as docs/security.md's production set-up does. */
const OPERATOR_KEY = "sk-ant-operator-secret-0123456789";

const data = <T = Record<string, unknown>>(frame: Frame | undefined) => frame?.data as T;

describe.each(BACKENDS)("the model gateway with the real claude CLI on %s", (backend) => {
  let mock: MockAnthropic;
  let ce: ClaudeEnv;
  let keyFile: string;
  let t: TestApp;
  let server: { url: string; close(): Promise<void> };
  let api: ReturnType<typeof httpApi>;

  beforeAll(async () => {
    mock = await startMockAnthropic({ quiet: true });
    ce = await makeClaudeEnv(mock.url);
    keyFile = join(ce.home, "operator-anthropic-key");
    await writeFile(keyFile, `${OPERATOR_KEY}\n`);
    t = await createTestApp(backend, {
      ...ce.env,
      // The operator's credential comes from a file; the CLI's own "any" key is not given.
      ANTHROPIC_API_KEY: "",
      ANTHROPIC_API_KEY_FILE: keyFile,
      AGENT_BRIDGE_WORK_DIR: ce.cwd,
      AGENT_BRIDGE_PERMISSION_MODE: "bypassPermissions",
    });
    server = await listen(t.app);
    api = httpApi(server.url);
  });
  afterAll(async () => {
    await server.close();
    await t.close();
    await mock.close();
    await ce.cleanup();
  });

  /** Sends a message and waits for its run's end, as JSON. */
  const send = async (text: string) => {
    const session = await api.newSession();
    const res = await api.postMessage(session.id, text, { Accept: "application/json" });
    return (await res.json()) as {
      run: { id: string; status: string };
      completion: Record<string, unknown>;
    };
  };

  it("a bypass run's agent finds no credential of the operator's, nor its file, in its environment or its CLI's, and the run succeeds through the gateway", async () => {
    const before = mock.requests.length;
    mock.script(
      {
        blocks: [
          {
            type: "tool_use",
            name: "Bash",
            // The CLI's own environment too: it keeps there what it hides from its Bash.
            input: { command: "printenv; echo ---; tr '\\0' '\\n' < /proc/$PPID/environ" },
          },
        ],
      },
      { blocks: [{ type: "text", text: "That is all of it." }] },
    );
    const { run } = await send("print your environment and your CLI's");
    expect(run.status).toBe("succeeded");

    const output = toolResultText(mock.mainRequests().at(-1));
    expect(output).toContain("---"); // both commands ran
    expect(output).not.toContain(OPERATOR_KEY);
    expect(output).not.toContain(keyFile);
    expect(output).not.toContain(mock.url);
    // Twice each: the agent's environment and its CLI's.
    expect(
      output.match(/^ANTHROPIC_BASE_URL=http:\/\/127\.0\.0\.1:\d+\/anthropic$/gm),
    ).toHaveLength(2);
    expect(output.match(/^ANTHROPIC_API_KEY=abrun_[\w-]{43}$/gm)).toHaveLength(2);
    // The gateway put the operator's key on every call, in place of the run's token.
    const calls = mock.requests.slice(before);
    expect(calls.length).toBeGreaterThanOrEqual(2);
    for (const call of calls) expect(call.headers["x-api-key"]).toBe(OPERATOR_KEY);
  });

  it("the run's token serves any client inside the run (curl lists the models), and gets the API's 401 once the run is over, as a made-up one does", async () => {
    mock.script(
      {
        blocks: [
          {
            type: "tool_use",
            name: "Bash",
            input: {
              command:
                'curl -s -H "x-api-key: $ANTHROPIC_API_KEY" "$ANTHROPIC_BASE_URL/v1/models"; echo; echo "$ANTHROPIC_BASE_URL $ANTHROPIC_API_KEY"',
            },
          },
        ],
      },
      { blocks: [{ type: "text", text: "Listed." }] },
    );
    const { run } = await send("list the models");
    expect(run.status).toBe("succeeded");
    const [models = "", access = ""] = toolResultText(mock.mainRequests().at(-1)).split("\n");
    expect(JSON.parse(models)).toMatchObject({ data: [{ id: "claude-mock" }] });

    const [baseUrl = "", token = ""] = access.split(" ");
    const ask = (key: string) =>
      fetch(`${baseUrl}/v1/messages`, {
        method: "POST",
        headers: {
          "x-api-key": key,
          "anthropic-version": "2023-06-01",
          "content-type": "application/json",
        },
        body: JSON.stringify({
          model: "claude-mock",
          max_tokens: 10,
          messages: [{ role: "user", content: "still there?" }],
        }),
      });
    const before = mock.requests.length;
    for (const key of [token, `abrun_${"A".repeat(43)}`]) {
      const res = await ask(key);
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual({
        type: "error",
        error: { type: "authentication_error", message: expect.any(String) },
      });
    }
    // Neither reached the upstream.
    expect(mock.requests.length).toBe(before);
  });

  it("streams the answer through as it comes: the first text_delta reaches the client while the upstream still holds its stream open", async () => {
    const held = holdUntilReleased();
    mock.script({
      blocks: [{ type: "text", text: "First words, then the rest once released." }],
      holdMidStream: held.hold,
    });
    const session = await api.newSession();
    const reader = SseReader.of(await api.postMessage(session.id, "take your time"));
    const [started] = await reader.events(1);
    await reader.until("text_delta");
    // The upstream is still holding the rest of its stream.
    held.release();
    const completion = (await reader.until("completion")).at(-1);
    expect(data(completion)).toMatchObject({
      status: "succeeded",
      result: "First words, then the rest once released.",
    });
    await t.deps.gateway.recorded();
    const runId = data<{ run_id: string }>(started).run_id;
    expect(await listModelCalls(t.database.db, runId)).toMatchObject([
      { endpoint: "/v1/messages", status: 200, error: null },
    ]);
  });

  it.each([
    [429, "rate_limit_error", "rate_limit"],
    [500, "api_error", "server_error"],
  ])(
    "an upstream %i reaches the CLI as the API's own error: it retries, and the run then succeeds",
    async (status, type, said) => {
      mock.script(
        { error: { status, type, message: `mock ${type}` }, once: true },
        { blocks: [{ type: "text", text: "Made it after all." }] },
      );
      const session = await api.newSession();
      const frames = await SseReader.of(await api.postMessage(session.id, "try")).events();
      const retrying = frames
        .filter((f) => f.event === "status")
        .map((f) => data<{ message: string }>(f).message);
      expect(retrying[0]).toMatch(new RegExp(`^API error \\(${status} ${said}\\), retrying 1/10`));
      expect(data(frames.at(-1))).toMatchObject({
        status: "succeeded",
        result: "Made it after all.",
      });
      await t.deps.gateway.recorded();
      const runId = data<{ run_id: string }>(frames[0]).run_id;
      expect(await listModelCalls(t.database.db, runId)).toMatchObject([
        { status, error: type },
        { status: 200, error: null },
      ]);
    },
  );

  it("an upstream 429 that the API says not to retry (x-should-retry: false) ends the run failed with the API's own message", async () => {
    mock.script({
      error: { status: 429, type: "rate_limit_error", message: "Number of requests too high" },
      headers: { "x-should-retry": "false" },
      once: true,
    });
    const { run, completion } = await send("once only");
    expect(completion).toMatchObject({
      status: "failed",
      error: "API Error: Request rejected (429) · Number of requests too high",
    });
    await t.deps.gateway.recorded();
    expect(await listModelCalls(t.database.db, run.id)).toMatchObject([
      { status: 429, error: "rate_limit_error" },
    ]);
  });

  it("a stream the upstream cuts reaches the CLI cut: it asks again, and the run succeeds", async () => {
    mock.script(
      { blocks: [{ type: "text", text: "Cut short right after this." }], cutMidStream: true },
      { blocks: [{ type: "text", text: "Whole this time." }] },
    );
    const { run, completion } = await send("go on");
    expect(completion).toMatchObject({ status: "succeeded", result: "Whole this time." });
    await t.deps.gateway.recorded();
    expect(await listModelCalls(t.database.db, run.id)).toMatchObject([
      { status: 200, error: "the upstream's answer broke off" },
      { status: 200, error: null },
    ]);
  });

  it("meters each call's usage as the upstream reported it, against its run", async () => {
    const toolTurn = {
      input_tokens: 1200,
      output_tokens: 35,
      cache_read_input_tokens: 300,
      cache_creation_input_tokens: 40,
    };
    const textTurn = {
      input_tokens: 1300,
      output_tokens: 12,
      cache_read_input_tokens: 1500,
      cache_creation_input_tokens: 0,
    };
    mock.script(
      {
        blocks: [{ type: "tool_use", name: "Bash", input: { command: "echo metered" } }],
        usage: toolTurn,
      },
      { blocks: [{ type: "text", text: "Metered." }], usage: textTurn },
    );
    const { run } = await send("run something");
    expect(run.status).toBe("succeeded");
    await t.deps.gateway.recorded();
    const served = [toolTurn, textTurn].map((u) => ({
      endpoint: "/v1/messages",
      inputTokens: u.input_tokens,
      outputTokens: u.output_tokens,
      cacheReadTokens: u.cache_read_input_tokens,
      cacheCreationTokens: u.cache_creation_input_tokens,
      status: 200,
      error: null,
      requestId: expect.stringMatching(/^req_mock/),
    }));
    expect(await listModelCalls(t.database.db, run.id)).toMatchObject(served);
    expect(await meteredUsage(t.database.db, run.id)).toEqual({
      calls: 2,
      inputTokens: 2500,
      outputTokens: 47,
      cacheReadTokens: 1800,
      cacheCreationTokens: 40,
      // At claude-opus-5-5's price, the CLI's default model: 2500 × $4 + 47 × $20 + 1800 × $0.20
      // + 40 × $5, per million.
      costUsd: 0.0115,
      pricedCalls: 2,
    });
  });
});
