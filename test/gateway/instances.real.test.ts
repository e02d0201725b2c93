import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listModelCalls, meteredUsage } from "../../src/store/model-calls.js";
import { createTestApp, createTestAppOn, httpApi, listen, type TestApp } from "../support/app.js";
import { type ClaudeEnv, makeClaudeEnv } from "../support/claude-env.js";
import { BACKENDS } from "../support/db.js";
import { type MockAnthropic, startMockAnthropic } from "../support/mock-anthropic.js";

// Two instances on one database, each serving the model gateway to the runs it executes, with the
// real claude CLI against one mock Messages API: their calls are metered into the one ledger, and
// a run's token is worth something at its own instance's gateway alone.

describe.each(BACKENDS)("the model gateways of two instances on %s", (backend) => {
  let mock: MockAnthropic;
  let ce: ClaudeEnv;
  let a: TestApp;
  let b: TestApp;
  const closers: (() => Promise<void>)[] = [];
  let apis: ReturnType<typeof httpApi>[];

  beforeAll(async () => {
    mock = await startMockAnthropic({ quiet: true });
    ce = await makeClaudeEnv(mock.url);
    const env = { ...ce.env, AGENT_BRIDGE_WORK_DIR: ce.cwd };
    a = await createTestApp(backend, env);
    b = createTestAppOn(a.database, env);
    apis = [];
    for (const t of [a, b]) {
      const server = await listen(t.app);
      closers.push(server.close);
      apis.push(httpApi(server.url));
    }
  });
  afterAll(async () => {
    for (const close of closers) await close();
    // B shares A's database, which A's close drops: B's runs end first.
    await b.deps.runs.shutdown(0);
    await b.deps.gateway.close();
    await a.close();
    await mock.close();
    await ce.cleanup();
  });

  it("meter the calls of each one's runs into the one ledger, each run's against it", async () => {
    const usage = [
      { input_tokens: 101, output_tokens: 7, cache_read_input_tokens: 0 },
      { input_tokens: 202, output_tokens: 9, cache_read_input_tokens: 50 },
    ];
    const runs: string[] = [];
    for (const [i, api] of apis.entries()) {
      const text = `on instance ${i}`;
      mock.scriptFor(text, { blocks: [{ type: "text", text: `Answered ${i}.` }], usage: usage[i] });
      const session = await api.newSession();
      const res = await api.postMessage(session.id, text, { Accept: "application/json" });
      const { run } = (await res.json()) as { run: { id: string; status: string } };
      expect(run.status).toBe("succeeded");
      runs.push(run.id);
    }
    await Promise.all([a.deps.gateway.recorded(), b.deps.gateway.recorded()]);
    // Whichever instance asks, the ledger is the database's.
    for (const [i, runId] of runs.entries()) {
      expect(await listModelCalls(b.database.db, runId)).toMatchObject([
        { endpoint: "/v1/messages", inputTokens: usage[i]?.input_tokens, status: 200 },
      ]);
      expect(await meteredUsage(a.database.db, runId)).toMatchObject({
        calls: 1,
        inputTokens: usage[i]?.input_tokens,
        outputTokens: usage[i]?.output_tokens,
        cacheReadTokens: usage[i]?.cache_read_input_tokens,
      });
    }
  });

  it("take a run's token at its own instance's gateway alone", async () => {
    const { baseUrl, token, close } = await a.deps.gateway.open("anthropic", "not-a-run", null);
    try {
      const atB = `${(await b.deps.gateway.listen()).url}/anthropic`;
      const ask = (base: string) =>
        fetch(`${base}/v1/models`, { headers: { "x-api-key": token } }).then((r) => r.status);
      expect(await ask(baseUrl)).toBe(200);
      expect(await ask(atB)).toBe(401);
    } finally {
      close();
    }
  });
});
