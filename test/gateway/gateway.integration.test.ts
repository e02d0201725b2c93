import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { anthropicApi } from "../../src/gateway/anthropic.js";
import type { ModelGateway } from "../../src/gateway/server.js";
import { listModelCalls, meteredUsage } from "../../src/store/model-calls.js";
import { BACKENDS, insertSessionRun, openTestDatabase, type TestDatabase } from "../support/db.js";
import { call, testGateway } from "../support/gateway.js";
import {
  holdUntilReleased,
  type MockAnthropic,
  startMockAnthropic,
} from "../support/mock-anthropic.js";

// The gateway as any client of the API meets it, without a CLI: what it forwards and how, what it
// refuses, and what it records, against the mock Messages API as the operator's upstream.

const OPERATOR_KEY = "sk-ant-operator";

describe.each(BACKENDS)("the model gateway on %s", (backend) => {
  let mock: MockAnthropic;
  let database: TestDatabase;
  let gateway: ModelGateway;

  beforeAll(async () => {
    mock = await startMockAnthropic({ quiet: true });
    database = await openTestDatabase(backend);
    gateway = testGateway(
      database.db,
      [anthropicApi({ baseUrl: mock.url, credential: { "x-api-key": OPERATOR_KEY } })],
      {
        // The mock's model, priced: USD per million tokens.
        prices: { "claude-mock": { input: 3, output: 15, cache_read: 0.3, cache_creation: 3.75 } },
        // The bridge's policy decides; here a model's name does.
        admit: () => async () => (model) =>
          model === "claude-over-budget"
            ? { code: "budget_exhausted", message: "the key's budget is spent" }
            : null,
      },
    );
  });
  afterAll(async () => {
    await gateway.close();
    await database.destroy();
    await mock.close();
  });

  /** A run in the database and the gateway's access for it. */
  const access = async () => {
    const run = await insertSessionRun(database.db);
    return { run, ...(await gateway.open("anthropic", run.id, null)) };
  };

  it("forwards a Messages call with the operator's key in place of the run's token, end-to-end headers both ways and no hop-by-hop ones, and meters a whole answer's usage and cost", async () => {
    const { run, baseUrl, token } = await access();
    mock.script({
      blocks: [{ type: "text", text: "Whole." }],
      usage: { input_tokens: 7, output_tokens: 3, cache_read_input_tokens: 5 },
    });
    const before = mock.requests.length;
    const answer = await call(
      `${baseUrl}/v1/messages?beta=true`,
      "POST",
      {
        authorization: `Bearer ${token}`,
        "anthropic-version": "2023-06-01",
        "anthropic-beta": "claude-code-20250219",
        "content-type": "application/json",
        connection: "keep-alive, x-this-hop",
        "x-this-hop": "1",
      },
      {
        model: "claude-mock",
        max_tokens: 100,
        tools: [{ name: "Bash" }],
        messages: [{ role: "user", content: "whole, please" }],
      },
    );
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body)).toMatchObject({
      type: "message",
      content: [{ text: "Whole." }],
    });
    expect(answer.headers["request-id"]).toMatch(/^req_mock/);

    const [upstream, ...others] = mock.requests.slice(before);
    expect(others).toEqual([]);
    expect(upstream?.headers).toMatchObject({
      "x-api-key": OPERATOR_KEY,
      "anthropic-version": "2023-06-01",
      "anthropic-beta": "claude-code-20250219",
    });
    expect(upstream?.headers.authorization).toBeUndefined();
    expect(upstream?.headers["x-this-hop"]).toBeUndefined();

    await gateway.recorded();
    expect(await listModelCalls(database.db, run.id)).toMatchObject([
      {
        endpoint: "/v1/messages",
        model: "claude-mock",
        inputTokens: 7,
        outputTokens: 3,
        cacheReadTokens: 5,
        cacheCreationTokens: 0,
        // 7 × $3 + 3 × $15 + 5 × $0.30, per million.
        costUsd: 0.0000675,
        status: 200,
        error: null,
        requestId: answer.headers["request-id"],
      },
    ]);
    expect(await meteredUsage(database.db, run.id)).toMatchObject({ calls: 1, inputTokens: 7 });
  });

  it("writes a call's record before its caller has the whole answer, or a stream's last event: the caller's next call is admitted on a spend that counts it", async () => {
    // The database as the gateway sees it, saying when a call's record is in.
    let recorded = 0;
    const watched = new Proxy(database.db, {
      get(target, key, receiver) {
        const value = Reflect.get(target, key, receiver);
        if (key !== "transaction") return value;
        return async (...args: unknown[]) => {
          const done = await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
          recorded++;
          return done;
        };
      },
    }) as typeof database.db;
    const watching = testGateway(watched, [
      anthropicApi({ baseUrl: mock.url, credential: { "x-api-key": OPERATOR_KEY } }),
    ]);
    try {
      const run = await insertSessionRun(database.db);
      const { baseUrl, token } = await watching.open("anthropic", run.id, null);
      const ask = (stream: boolean) => {
        mock.script({ blocks: [{ type: "text", text: "Counted." }] });
        return new Promise<{ recordedAtLast: number; body: string }>((resolve, reject) => {
          const req = request(
            `${baseUrl}/v1/messages`,
            { method: "POST", headers: { "x-api-key": token, "content-type": "application/json" } },
            (res) => {
              let body = "";
              let recordedAtLast = -1;
              res.setEncoding("utf8");
              res.on("data", (chunk: string) => {
                body += chunk;
                if (recordedAtLast < 0 && body.includes("message_stop")) recordedAtLast = recorded;
              });
              res.on("end", () =>
                resolve({ recordedAtLast: stream ? recordedAtLast : recorded, body }),
              );
            },
          );
          req.on("error", reject);
          req.end(
            JSON.stringify({
              model: "claude-mock",
              max_tokens: 10,
              stream,
              tools: [{ name: "Bash" }],
              messages: [{ role: "user", content: "count me" }],
            }),
          );
        });
      };
      const whole = await ask(false);
      expect(JSON.parse(whole.body)).toMatchObject({ content: [{ text: "Counted." }] });
      expect(whole.recordedAtLast).toBe(1);
      const streamed = await ask(true);
      expect(streamed.body).toContain("message_stop");
      expect(streamed.recordedAtLast).toBe(2);
    } finally {
      await watching.close();
    }
  });

  it("cuts a call still under way when its run's access closes, and counts it before the run's records are said to be in", async () => {
    const { run, baseUrl, token, close, recorded } = await access();
    const held = holdUntilReleased();
    mock.script({
      blocks: [{ type: "text", text: "Never finished." }],
      usage: { input_tokens: 11, output_tokens: 4 },
      holdMidStream: held.hold,
    });
    const cut = new Promise<string>((resolve) => {
      const req = request(
        `${baseUrl}/v1/messages`,
        { method: "POST", headers: { "x-api-key": token, "content-type": "application/json" } },
        (res) => {
          let body = "";
          res.setEncoding("utf8");
          res.on("data", (chunk: string) => {
            body += chunk;
          });
          res.on("close", () => resolve(body));
        },
      );
      req.on("error", () => resolve(""));
      req.end(
        JSON.stringify({
          model: "claude-mock",
          max_tokens: 10,
          stream: true,
          tools: [{ name: "Bash" }],
          messages: [{ role: "user", content: "take your time" }],
        }),
      );
    });
    await held.arrived;
    close();
    await recorded();
    // Counted already, as far as it went: its input, and no end.
    expect(await listModelCalls(database.db, run.id)).toMatchObject([
      { inputTokens: 11, error: expect.any(String) },
    ]);
    expect(await cut).not.toContain("message_stop");
    held.release();
  });

  it("records a call of a model without a price with its tokens and no cost", async () => {
    const { run, baseUrl, token } = await access();
    mock.script({ blocks: [{ type: "text", text: "Unpriced." }] });
    const answer = await call(
      `${baseUrl}/v1/messages`,
      "POST",
      { "x-api-key": token, "content-type": "application/json" },
      {
        model: "claude-unpriced",
        max_tokens: 100,
        tools: [{ name: "Bash" }],
        messages: [{ role: "user", content: "what does this cost?" }],
      },
    );
    expect(answer.status).toBe(200);
    await gateway.recorded();
    expect(await listModelCalls(database.db, run.id)).toMatchObject([
      { model: "claude-unpriced", inputTokens: 100, outputTokens: 20, costUsd: null },
    ]);
  });

  it("refuses a call its run may not make with the API's billing_error, not to be retried, without forwarding or metering it", async () => {
    const { run, baseUrl, token } = await access();
    const before = mock.requests.length;
    const refused = await call(
      `${baseUrl}/v1/messages`,
      "POST",
      { "x-api-key": token, "content-type": "application/json" },
      { model: "claude-over-budget", max_tokens: 10, messages: [{ role: "user", content: "hi" }] },
    );
    expect(refused.status).toBe(402);
    expect(refused.headers["x-should-retry"]).toBe("false");
    expect(JSON.parse(refused.body)).toEqual({
      type: "error",
      error: { type: "billing_error", message: "the key's budget is spent" },
    });
    expect(mock.requests.length).toBe(before);
    await gateway.recorded();
    expect(await listModelCalls(database.db, run.id)).toEqual([]);
  });

  it("forwards the token count and the model list unmetered, and the CLI's connectivity check without any credential", async () => {
    const { run, baseUrl, token } = await access();
    const headers = { "x-api-key": token, "content-type": "application/json" };
    const counted = await call(`${baseUrl}/v1/messages/count_tokens`, "POST", headers, {
      model: "claude-mock",
      messages: [{ role: "user", content: "count me" }],
    });
    expect(counted.status).toBe(200);
    expect(JSON.parse(counted.body)).toEqual({ input_tokens: expect.any(Number) });
    const models = await call(`${baseUrl}/v1/models`, "GET", headers);
    expect(JSON.parse(models.body)).toMatchObject({ data: [{ id: "claude-mock" }] });

    const before = mock.requests.length;
    expect((await call(`${baseUrl}/api/hello`, "HEAD", {})).status).toBe(200);
    expect(mock.requests.slice(before)).toMatchObject([{ method: "HEAD", path: "/api/hello" }]);
    expect(mock.requests.at(-1)?.headers["x-api-key"]).toBeUndefined();

    await gateway.recorded();
    expect(await listModelCalls(database.db, run.id)).toEqual([]);
  });

  it("answers in the API's own shape: 401 without a live token (none, made up, or its run's over), 404 for what it does not forward; none of it reaches the upstream", async () => {
    const { baseUrl, token, close } = await access();
    const before = mock.requests.length;
    const ask = (path: string, key?: string) =>
      call(`${baseUrl}${path}`, "POST", key ? { "x-api-key": key } : {}, { model: "claude-mock" });

    const unknown = await ask("/v1/messages/batches", token);
    expect(unknown.status).toBe(404);
    expect(JSON.parse(unknown.body)).toEqual({
      type: "error",
      error: { type: "not_found_error", message: expect.stringContaining("/v1/messages/batches") },
    });
    close();
    for (const key of [undefined, "sk-ant-made-up", token]) {
      const refused = await ask("/v1/messages", key);
      expect(refused.status).toBe(401);
      expect(JSON.parse(refused.body)).toEqual({
        type: "error",
        error: { type: "authentication_error", message: expect.any(String) },
      });
    }
    expect(mock.requests.length).toBe(before);
  });
});

describe.each(BACKENDS)("the model gateway behind the operator's proxy on %s", (backend) => {
  let mock: MockAnthropic;
  let database: TestDatabase;
  let gateway: ModelGateway;
  let proxy: Server;
  /** The absolute URLs the proxy forwarded, as an HTTP proxy is asked for them. */
  const proxied: string[] = [];

  beforeAll(async () => {
    mock = await startMockAnthropic({ quiet: true });
    database = await openTestDatabase(backend);
    // A plain forward proxy, as an operator's network may require for every way out.
    proxy = createServer((req, res) => {
      proxied.push(req.url ?? "");
      const out = request(req.url ?? "", { method: req.method, headers: req.headers }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      });
      req.pipe(out);
    });
    await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
    // Read as the server's environment, where the operator sets it.
    process.env.HTTP_PROXY = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
    gateway = testGateway(database.db, [
      anthropicApi({ baseUrl: mock.url, credential: { "x-api-key": OPERATOR_KEY } }),
    ]);
  });
  afterAll(async () => {
    delete process.env.HTTP_PROXY;
    delete process.env.NO_PROXY;
    await gateway.close();
    proxy.close();
    await database.destroy();
    await mock.close();
  });

  it("sends its calls upstream through HTTP(S)_PROXY, and directly to a host NO_PROXY names", async () => {
    const run = await insertSessionRun(database.db);
    const { baseUrl, token } = await gateway.open("anthropic", run.id, null);
    const ask = () =>
      call(`${baseUrl}/v1/models`, "GET", {
        "x-api-key": token,
        "anthropic-version": "2023-06-01",
      });
    expect((await ask()).status).toBe(200);
    expect(proxied).toEqual([`${mock.url}/v1/models`]);
    process.env.NO_PROXY = "127.0.0.1";
    expect((await ask()).status).toBe(200);
    expect(proxied).toHaveLength(1);
  });
});
