import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueKey } from "../../src/auth/keys.js";
import { createTestApp, fetchAs, listen, type TestApp } from "../support/app.js";
import { type ClaudeEnv, makeClaudeEnv } from "../support/claude-env.js";
import { REAL_CLI_BACKENDS } from "../support/db.js";
import { type MockAnthropic, startMockAnthropic } from "../support/mock-anthropic.js";

// A key's monthly budget with the real `claude` binary against the mock Messages API, whose usage
// tokens make each turn cost money: runs are passed `--max-budget-usd=<what is left>`, the CLI
// stops the run at it, and a message once the budget is spent gets 402 and starts nothing.

/** Tokens that make one turn cost a noticeable amount at the CLI's prices. */
const COSTLY = { input_tokens: 100_000, output_tokens: 1_000 };

describe.each(REAL_CLI_BACKENDS)("monthly budgets with the real CLI on %s", (backend) => {
  let mock: MockAnthropic;
  let ce: ClaudeEnv;
  let t: TestApp;
  let server: { url: string; close(): Promise<void> };
  let admin: string;

  beforeAll(async () => {
    mock = await startMockAnthropic({ quiet: true });
    ce = await makeClaudeEnv(mock.url);
    t = await createTestApp(backend, {
      ...ce.env,
      AGENT_BRIDGE_AUTH: "keys",
      AGENT_BRIDGE_WORK_DIR: ce.cwd,
    });
    server = await listen(t.app);
    admin = (await issueKey(t.database.db, { name: "admin", admin: true })).key;
  });
  afterAll(async () => {
    await server.close();
    await t.close();
    await mock.close();
    await ce.cleanup();
  });

  const call = (key: string, path: string, init: RequestInit = {}) =>
    fetchAs(server.url, key, path, init);
  /** Posts a message and waits for the run's end (JSON answer). */
  const message = (key: string, sessionId: string, text: string) =>
    call(key, `/v1/sessions/${sessionId}/messages`, {
      method: "POST",
      headers: { Accept: "application/json" },
      body: JSON.stringify({ text }),
    });

  it("stops runs at the key's cap: the CLI gets what is left, and a message after the cap gets 402", async () => {
    const { key, row } = await issueKey(t.database.db, { name: "capped", admin: false });
    const session = (await (await call(key, "/v1/sessions", { method: "POST", body: "{}" })).json())
      .id as string;

    // A first run, under no cap yet, shows what one such turn costs.
    mock.script({ blocks: [{ type: "text", text: "first" }], usage: COSTLY });
    const first = await (await message(key, session, "one turn")).json();
    expect(first.completion).toMatchObject({ status: "succeeded" });
    const turnCost: number = first.completion.cost_usd;
    expect(turnCost).toBeGreaterThan(0);

    // A cap that leaves less than one turn: the next run may start, but stops after its first.
    const cap = Math.round(turnCost * 1.25 * 1e6) / 1e6;
    const left = Math.round((cap - turnCost) * 1e6) / 1e6;
    const set = await call(admin, `/v1/keys/${row.id}`, {
      method: "PATCH",
      body: JSON.stringify({ max_budget_usd: cap }),
    });
    expect(set.status).toBe(200);
    const usage = await (await call(key, "/v1/usage")).json();
    expect(usage.budget).toMatchObject({ max_usd: cap, left_usd: expect.closeTo(left, 6) });
    expect(usage.budget.spent_usd).toBeCloseTo(turnCost, 9);
    expect(usage.budget.period_start).toMatch(/^\d{4}-\d\d-01T00:00:00\.000Z$/);

    // Five turns scripted, each a tool call that leads to the next: the CLI stops after the turn
    // that reaches the cap (under load it has been seen to have begun one more).
    const toolTurn = (n: number) => ({
      blocks: [{ type: "tool_use" as const, name: "Bash", input: { command: `echo ${n}` } }],
      usage: COSTLY,
    });
    mock.script(toolTurn(1), toolTurn(2), toolTurn(3), toolTurn(4), {
      blocks: [{ type: "text", text: "never reached" }],
      usage: COSTLY,
    });
    const stopped = await (await message(key, session, "keep going")).json();
    expect(stopped.completion).toMatchObject({
      status: "failed",
      is_error: true,
      error_code: "budget_exhausted",
    });
    // The CLI names the cap it was given: what was left of the month.
    expect(stopped.completion.error).toBe(`Reached maximum budget ($${left})`);
    const turns: number = stopped.completion.usage.num_turns;
    expect(turns).toBeGreaterThanOrEqual(1);
    expect(turns).toBeLessThanOrEqual(2);
    // What the API answered is what was spent (the CLI's count of turns can be one ahead of the
    // requests it got answers to, under load): it stopped at the cap, long before the fifth.
    const answered = 5 - mock.pending();
    expect(answered).toBeGreaterThanOrEqual(1);
    expect(answered).toBeLessThanOrEqual(2);
    expect(stopped.completion.cost_usd).toBeCloseTo(answered * turnCost, 9);

    const spent = await (await call(key, "/v1/usage")).json();
    expect(spent.budget.spent_usd).toBeCloseTo((1 + answered) * turnCost, 9);
    expect(spent.budget.left_usd).toBe(0);

    // Spent: the next message is refused before anything starts.
    const requests = mock.mainRequests().length;
    const refused = await message(key, session, "one more");
    expect(refused.status).toBe(402);
    const problem = await refused.json();
    expect(problem.code).toBe("budget_exhausted");
    expect(problem.detail).toContain(`budget of $${cap}`);
    expect(mock.mainRequests().length).toBe(requests);
    const after = await (await call(key, `/v1/sessions/${session}`)).json();
    expect(after.usage.runs).toBe(2);

    // Raising the cap lets the key run again.
    await call(admin, `/v1/keys/${row.id}`, {
      method: "PATCH",
      body: JSON.stringify({ max_budget_usd: null }),
    });
    mock.script({ blocks: [{ type: "text", text: "again" }] });
    const again = await message(key, session, "after the raise");
    expect(again.status).toBe(200);
    expect((await again.json()).completion.status).toBe("succeeded");
    expect((await (await call(key, "/v1/usage")).json()).budget).toBeNull();
  });
});
