import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CallRefusal } from "../../src/gateway/admission.js";
import type { CallUsage } from "../../src/gateway/api.js";
import { openaiApi } from "../../src/gateway/openai.js";
import { responsesUsage } from "../../src/gateway/responses-usage.js";
import type { ModelGateway } from "../../src/gateway/server.js";
import { ResponseMeter } from "../../src/gateway/usage-meter.js";
import { listModelCalls } from "../../src/store/model-calls.js";
import { BACKENDS, insertSessionRun, openTestDatabase, type TestDatabase } from "../support/db.js";
import { call, testGateway } from "../support/gateway.js";
import { MOCK_MODEL, type MockOpenAI, startMockOpenAI } from "../support/mock-openai.js";

// The gateway's Responses API (src/gateway/openai.ts) as any client meets it, without a CLI: what
// it forwards and how, what it refuses, and what it records, against the mock Responses API as
// the operator's upstream; and the reading of a Responses answer's usage.

const OPERATOR_KEY = "sk-proj-operator";

/** What the bridge's policy refuses, by the model asked for. */
const REFUSALS: Record<string, CallRefusal> = {
  "gpt-over-budget": { code: "budget_exhausted", message: "the key's budget is spent" },
  "gpt-not-listed": { code: "policy_denied", message: "the key's policy does not allow it" },
};

describe.each(BACKENDS)("the model gateway's Responses API on %s", (backend) => {
  let mock: MockOpenAI;
  let database: TestDatabase;
  let gateway: ModelGateway;

  beforeAll(async () => {
    mock = await startMockOpenAI({ quiet: true });
    database = await openTestDatabase(backend);
    gateway = testGateway(
      database.db,
      [
        openaiApi({
          baseUrl: `${mock.url}/v1`,
          credential: { authorization: `Bearer ${OPERATOR_KEY}` },
        }),
      ],
      {
        prices: { [MOCK_MODEL]: { input: 2, output: 10, cache_read: 0.1, cache_creation: 2.5 } },
        // The bridge's policy decides; here a model's name does.
        admit: () => async () => (model) => REFUSALS[model ?? ""] ?? null,
      },
    );
  });
  afterAll(async () => {
    await gateway.close();
    await database.destroy();
    await mock.close();
  });

  const access = async () => {
    const run = await insertSessionRun(database.db);
    return { run, ...(await gateway.open("openai", run.id, null)) };
  };

  const responses = (baseUrl: string, token: string, stream: boolean) =>
    call(
      `${baseUrl}/responses`,
      "POST",
      {
        authorization: `Bearer ${token}`,
        "content-type": "application/json",
        "openai-beta": "responses=experimental",
        connection: "keep-alive, x-this-hop",
        "x-this-hop": "1",
      },
      { model: MOCK_MODEL, input: "hello", stream },
    );

  it("forwards a streamed call with the operator's key in place of the run's token, end-to-end headers only, and meters response.completed's usage", async () => {
    const { run, baseUrl, token } = await access();
    mock.script({
      output: [{ type: "message", text: "Streamed." }],
      usage: { input_tokens: 900, cached_tokens: 600, output_tokens: 21 },
    });
    const before = mock.requests.length;
    const answer = await responses(baseUrl, token, true);
    expect(answer.status).toBe(200);
    expect(answer.headers["content-type"]).toBe("text/event-stream");
    expect(answer.body).toContain("event: response.output_text.delta");
    expect(answer.body).toContain("event: response.completed");

    const [upstream, ...others] = mock.requests.slice(before);
    expect(others).toEqual([]);
    expect(upstream).toMatchObject({ method: "POST", path: "/v1/responses" });
    expect(upstream?.headers).toMatchObject({
      authorization: `Bearer ${OPERATOR_KEY}`,
      "openai-beta": "responses=experimental",
    });
    expect(upstream?.headers["x-this-hop"]).toBeUndefined();

    await gateway.recorded();
    expect(await listModelCalls(database.db, run.id)).toEqual([
      expect.objectContaining({
        endpoint: "/responses",
        model: MOCK_MODEL,
        inputTokens: 300,
        cacheReadTokens: 600,
        outputTokens: 21,
        cacheCreationTokens: 0,
        // 300 × $2 + 600 × $0.10 + 21 × $10, per million.
        costUsd: 0.00087,
        status: 200,
        error: null,
        requestId: answer.headers["x-request-id"],
      }),
    ]);
  });

  it("meters a whole (non-streamed) answer's usage from its body", async () => {
    const { run, baseUrl, token } = await access();
    mock.script({
      output: [{ type: "message", text: "Whole." }],
      usage: { input_tokens: 50, cached_tokens: 0, output_tokens: 4 },
    });
    const answer = await responses(baseUrl, token, false);
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body)).toMatchObject({ object: "response", status: "completed" });
    await gateway.recorded();
    expect(await listModelCalls(database.db, run.id)).toMatchObject([
      { inputTokens: 50, outputTokens: 4, cacheReadTokens: 0, status: 200, error: null },
    ]);
  });

  it("passes an upstream error through as it came, and records its code", async () => {
    const { run, baseUrl, token } = await access();
    const error = {
      status: 429,
      message: "Rate limit reached",
      type: "requests",
      code: "rate_limit_exceeded",
    };
    mock.script({ error });
    const answer = await responses(baseUrl, token, true);
    expect(answer.status).toBe(429);
    expect(JSON.parse(answer.body)).toEqual({
      error: { message: error.message, type: error.type, param: null, code: error.code },
    });
    await gateway.recorded();
    expect(await listModelCalls(database.db, run.id)).toMatchObject([
      { status: 429, error: "rate_limit_exceeded", inputTokens: 0 },
    ]);
  });

  it("refuses a call its run may not make as the API refuses a spent quota (429 insufficient_quota) or a model the project may not use (403 model_not_found), not to be retried, without forwarding or metering it", async () => {
    const { run, baseUrl, token } = await access();
    const before = mock.requests.length;
    const refusals: [string, number, string, string][] = [
      ["gpt-over-budget", 429, "insufficient_quota", "insufficient_quota"],
      ["gpt-not-listed", 403, "invalid_request_error", "model_not_found"],
    ];
    for (const [model, status, type, code] of refusals) {
      const answer = await call(
        `${baseUrl}/responses`,
        "POST",
        { authorization: `Bearer ${token}`, "content-type": "application/json" },
        { model, input: "hello", stream: true },
      );
      expect(answer.status).toBe(status);
      expect(answer.headers["x-should-retry"]).toBe("false");
      expect(JSON.parse(answer.body)).toEqual({
        error: { message: REFUSALS[model]?.message, type, code, param: null },
      });
    }
    expect(mock.requests.length).toBe(before);
    await gateway.recorded();
    expect(await listModelCalls(database.db, run.id)).toEqual([]);
  });

  it("forwards the model list unmetered", async () => {
    const { run, baseUrl, token } = await access();
    const models = await call(`${baseUrl}/models`, "GET", { authorization: `Bearer ${token}` });
    expect(models.status).toBe(200);
    expect(JSON.parse(models.body)).toMatchObject({ data: [{ id: MOCK_MODEL }] });
    await gateway.recorded();
    expect(await listModelCalls(database.db, run.id)).toEqual([]);
  });

  it("refuses a call without a live run token (401), or one it does not forward (404), in OpenAI's shape, and sends nothing upstream", async () => {
    const { baseUrl, token, close } = await access();
    const before = mock.requests.length;
    const refusals: [string, Record<string, string>, number, string][] = [
      ["/responses", {}, 401, "invalid_api_key"],
      ["/responses", { authorization: `Bearer abrun_${"A".repeat(43)}` }, 401, "invalid_api_key"],
      // The Anthropic way of presenting a key is not this API's.
      ["/responses", { "x-api-key": token }, 401, "invalid_api_key"],
      ["/chat/completions", { authorization: `Bearer ${token}` }, 404, "unknown_url"],
    ];
    for (const [path, headers, status, code] of refusals) {
      const answer = await call(`${baseUrl}${path}`, "POST", headers, { model: MOCK_MODEL });
      expect(answer.status).toBe(status);
      expect(JSON.parse(answer.body)).toEqual({
        error: { message: expect.any(String), type: "invalid_request_error", code, param: null },
      });
    }
    close();
    const after = await responses(baseUrl, token, true);
    expect(after.status).toBe(401);
    expect(mock.requests.length).toBe(before);
  });
});

describe("a Responses answer's usage", () => {
  const read = (contentType: string, ...chunks: string[]): CallUsage => {
    const meter = new ResponseMeter(contentType, responsesUsage);
    for (const chunk of chunks) meter.push(Buffer.from(chunk));
    return meter.usage();
  };
  const event = (type: string, data: Record<string, unknown>) =>
    `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
  const usage = { input_tokens: 10, input_tokens_details: { cached_tokens: 4 }, output_tokens: 3 };

  it("is read from the last event of a stream split anywhere, the model from its first", () => {
    const stream =
      event("response.created", { response: { model: "gpt-x", status: "in_progress" } }) +
      event("response.output_text.delta", { delta: "Hi" }) +
      event("response.completed", { response: { model: "gpt-x", status: "completed", usage } });
    const at = stream.length - 17;
    expect(read("text/event-stream", stream.slice(0, at), stream.slice(at))).toEqual({
      model: "gpt-x",
      inputTokens: 6,
      outputTokens: 3,
      cacheReadTokens: 4,
      cacheCreationTokens: 0,
      errorType: null,
      complete: true,
    });
  });

  it("counts an incomplete response as whole, and names what failed one or broke a stream off", () => {
    const ended = (type: string, response: Record<string, unknown>) =>
      read("text/event-stream; charset=utf-8", event(type, { response: { ...response, usage } }));
    expect(ended("response.incomplete", { status: "incomplete" })).toMatchObject({
      complete: true,
      errorType: null,
      outputTokens: 3,
    });
    expect(
      ended("response.failed", { status: "failed", error: { code: "server_error" } }),
    ).toMatchObject({ complete: false, errorType: "server_error", inputTokens: 6 });
    expect(
      read("text/event-stream", event("error", { code: "rate_limit_exceeded", message: "no" })),
    ).toMatchObject({ complete: false, errorType: "rate_limit_exceeded" });
    expect(read("text/event-stream", event("response.created", { response: {} }))).toMatchObject({
      complete: false,
      errorType: null,
    });
  });

  it("is read from a whole body, or its error", () => {
    const body = { object: "response", model: "gpt-y", status: "completed", usage };
    expect(read("application/json", JSON.stringify(body))).toMatchObject({
      model: "gpt-y",
      inputTokens: 6,
      complete: true,
    });
    expect(
      read("application/json", JSON.stringify({ error: { type: "server_error", code: null } })),
    ).toMatchObject({ errorType: "server_error", complete: false });
  });
});
