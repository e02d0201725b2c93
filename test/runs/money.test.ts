import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueKey } from "../../src/auth/keys.js";
import { noUsage } from "../../src/completion-event.js";
import { monthOf, monthSpend } from "../../src/store/keys.js";
import { finishRun, RunAlreadyClosedError } from "../../src/store/run-lifecycle.js";
import { runs } from "../../src/store/schema.js";
import { createTestApp, requestAs, type TestApp } from "../support/app.js";
import { BACKENDS } from "../support/db.js";
import { type FakeCli, fakeCli } from "../support/fake-cli.js";
import { streamedReply } from "../support/fake-scenarios.js";

// Costs are money: a run's, its session's, a key's month and /v1/usage are added up in the
// database as decimals, exactly, where doubles made 0.1 + 0.2 = 0.30000000000000004 and
// /v1/usage showed 0.03959239999999999. A key's budget is held against the exact spend.

describe.each(BACKENDS)("costs added up exactly, on %s", (backend) => {
  let t: TestApp;
  let fake: FakeCli;
  let key: string;
  let keyId: string;

  beforeAll(async () => {
    fake = await fakeCli(streamedReply(["ok"]));
    t = await createTestApp(backend, { ...fake.bridgeEnv, AGENT_BRIDGE_AUTH: "keys" });
    const issued = await issueKey(t.database.db, {
      name: "exact",
      admin: false,
      maxBudgetUsd: 0.7,
    });
    key = issued.key;
    keyId = issued.row.id;
  });
  afterAll(async () => {
    await t.close();
    await fake.cleanup();
  });

  const as = (path: string, init: RequestInit = {}) => requestAs(t.app, key, path, init);
  const newSession = async (): Promise<string> =>
    (await (await as("/v1/sessions", { method: "POST" })).json()).id;
  /** A message whose run the CLI says cost `costUsd`; the answer. */
  const spend = async (sessionId: string, costUsd: number) => {
    await fake.setScenario(streamedReply(["ok"], { costUsd }));
    return as(`/v1/sessions/${sessionId}/messages`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify({ text: "spend" }),
    });
  };

  it("a session's, a key's month and /v1/usage are the exact sums of the runs' costs, and the budget holds at the exact spend", async () => {
    const a = await newSession();
    const b = await newSession();
    for (const [session, cost] of [
      [a, 0.1],
      [a, 0.2],
      [b, 0.1],
    ] as const) {
      expect((await spend(session, cost)).status).toBe(200);
    }
    // A cost as a CLI adds it up in floating point: kept to 10 decimal places, its noise gone.
    const noisy = await (await spend(b, 0.1 + 0.2)).json();
    expect(noisy.completion.cost_usd).toBe(0.3);
    expect(noisy.run.cost_usd).toBe(0.3);

    expect((await (await as(`/v1/sessions/${a}`)).json()).usage.cost_usd).toBe(0.3);
    expect((await (await as(`/v1/sessions/${b}`)).json()).usage.cost_usd).toBe(0.4);
    expect((await (await as("/v1/usage")).json()).cost_usd).toBe(0.7);
    expect(await monthSpend(t.database.db, keyId, monthOf(new Date()))).toBe(0.7);

    // $0.7 of $0.7 spent: the next message is refused, naming the exact spend.
    const refused = await spend(a, 0.1);
    expect(refused.status).toBe(402);
    expect((await refused.json()).detail).toContain("is spent ($0.7)");
  });

  it("a run's end counts once: recorded again (as by an instance that found its owner gone), it is refused and changes no total", async () => {
    const other = await issueKey(t.database.db, { name: "once", admin: false });
    const asOther = (path: string, init: RequestInit = {}) =>
      requestAs(t.app, other.key, path, init);
    const session = (await (await asOther("/v1/sessions", { method: "POST" })).json()).id;
    await fake.setScenario(streamedReply(["ok"], { costUsd: 0.25 }));
    const answer = await (
      await asOther(`/v1/sessions/${session}/messages`, {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "application/json" },
        body: JSON.stringify({ text: "spend" }),
      })
    ).json();
    expect(answer.run.status).toBe("succeeded");
    const [row] = await t.database.db.select().from(runs).where(eq(runs.id, answer.run.id));
    if (!row) throw new Error("the run's row is gone");
    const month = monthOf(new Date());
    const totals = async () => ({
      session: (await (await asOther(`/v1/sessions/${session}`)).json()).usage,
      run: (await (await asOther(`/v1/runs/${row.id}`)).json()).cost_usd,
      month: await monthSpend(t.database.db, other.row.id, month),
    });
    const before = await totals();
    expect(before).toMatchObject({ session: { cost_usd: 0.25, runs: 1 }, run: 0.25, month: 0.25 });

    const again = finishRun(t.database.db, row, {
      status: "failed",
      usage: { ...noUsage(), input_tokens: 1000, output_tokens: 1000 },
      costUsd: 5,
      durationMs: 1,
      agentSessionId: null,
      lastMessageUuid: null,
      exitCode: 1,
    });
    await expect(again).rejects.toBeInstanceOf(RunAlreadyClosedError);
    expect(await totals()).toEqual(before);
  });
});

describe.each(BACKENDS)("a cost no run can have, on %s", (backend) => {
  let t: TestApp;
  let fake: FakeCli;

  beforeAll(async () => {
    fake = await fakeCli(streamedReply(["ok"]));
    t = await createTestApp(backend, fake.bridgeEnv);
  });
  afterAll(async () => {
    await t.close();
    await fake.cleanup();
  });

  const post = (path: string, body?: unknown) =>
    t.app.request(path, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });

  // 2e10 is more than the cost columns hold: the run's end, and its failure, were refused, and the
  // session stayed busy with a run that never ended; a negative cost would lower a key's spend.
  it.each([2e10, -5])(
    "is kept as unknown (%s): the run ends as it did, and its session takes the next message",
    async (costUsd) => {
      const created = await post("/v1/sessions", {});
      expect(created.status).toBe(201);
      const session = await created.json();
      await fake.setScenario(streamedReply(["ok"], { costUsd }));
      const res = await post(`/v1/sessions/${session.id}/messages`, { text: "go" });
      const answer = await res.json();
      expect(res.status, JSON.stringify(answer)).toBe(200);
      expect(answer.completion).toMatchObject({ status: "succeeded", cost_usd: null });
      expect(answer.run).toMatchObject({ status: "succeeded", cost_usd: null });
      // The next message runs, and the session's cost is that run's alone.
      await fake.setScenario(streamedReply(["again"], { costUsd: 0.25 }));
      const next = await post(`/v1/sessions/${session.id}/messages`, { text: "again" });
      expect(next.status).toBe(200);
      const after = await (await t.app.request(`/v1/sessions/${session.id}`)).json();
      expect(after.usage.cost_usd).toBe(0.25);
    },
  );
});
