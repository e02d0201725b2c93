import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueKey } from "../../src/auth/keys.js";
import { callAdmission } from "../../src/auth/policy.js";
import { loadConfig } from "../../src/config.js";
import type { Admission } from "../../src/gateway/admission.js";
import { type KeyPolicyColumns, keyOfRun, monthOf, monthSpend } from "../../src/store/keys.js";
import { listModelCalls, recordModelCall } from "../../src/store/model-calls.js";
import { BACKENDS, insertSessionRun, openTestDatabase, type TestDatabase } from "../support/db.js";

// What the model gateway asks before it forwards a run's metered call (src/auth/policy.ts
// callAdmission), against the ledger as the database holds it.

describe.each(BACKENDS)("a metered call's admission on %s", (backend) => {
  let database: TestDatabase;
  let admit: Admission;

  beforeAll(async () => {
    database = await openTestDatabase(backend);
    admit = callAdmission(database.db, loadConfig({}));
  });
  afterAll(() => database.destroy());

  /** A run of a key with `policy` (none: a session without a key). */
  const runOf = async (policy?: KeyPolicyColumns) => {
    const key = policy
      ? (await issueKey(database.db, { name: "k", admin: false, ...policy })).row.id
      : null;
    return (await insertSessionRun(database.db, "hi", key)).id;
  };
  /** Records a call of the run's that cost `usd` (as the call `id`, by default a new one). */
  const spend = (runId: string, usd: number, id: string = randomUUID()) =>
    recordModelCall(database.db, {
      id,
      runId,
      endpoint: "/v1/messages",
      model: "claude-opus-5-5",
      inputTokens: 1,
      outputTokens: 1,
      cacheReadTokens: 0,
      cacheCreationTokens: 0,
      costUsd: usd,
      status: 200,
      error: null,
      requestId: null,
      startedAt: new Date(),
      durationMs: 1,
    });
  const ask = async (runId: string, model: string | null, maxBudgetUsd: number | null = null) =>
    (await admit({ runId, maxBudgetUsd })())(model);

  it("lets a call go while the key's month and the run's own cap have something left, and refuses the next once either is spent", async () => {
    const runId = await runOf({ maxBudgetUsd: 1 });
    expect(await ask(runId, "claude-opus-5-5", 0.5)).toBeNull();
    await spend(runId, 0.5);
    expect(await ask(runId, "claude-opus-5-5")).toBeNull();
    expect(await ask(runId, "claude-opus-5-5", 0.5)).toEqual({
      code: "max_budget",
      message: "the run's max_budget_usd of $0.5 is spent ($0.5)",
    });
    // Another run of the key spends the rest of its month.
    await spend(await insertSessionRunOf(runId), 0.5);
    expect(await ask(runId, "claude-opus-5-5")).toMatchObject({
      code: "budget_exhausted",
      message: expect.stringContaining("the key's budget of $1"),
    });
  });

  it("refuses a model outside the key's list, and, for a key with a budget or a run with its own cap, a model without a price; a run without a key or a cap may call any", async () => {
    const listed = await runOf({ models: ["claude-opus-5-5"] });
    expect(await ask(listed, "claude-opus-5-5")).toBeNull();
    expect(await ask(listed, "claude-haiku-4-5")).toMatchObject({ code: "policy_denied" });
    expect(await ask(listed, null)).toMatchObject({ code: "policy_denied" });
    const capped = await runOf({ maxBudgetUsd: 10 });
    expect(await ask(capped, "claude-unpriced")).toEqual({
      code: "policy_denied",
      message:
        "the key has a budget, and the model claude-unpriced has no price to count its spend at (AGENT_BRIDGE_MODEL_PRICES)",
    });
    // A cap its spend cannot be counted against is no cap.
    expect(await ask(await runOf({}), "claude-unpriced", 5)).toEqual({
      code: "policy_denied",
      message:
        "the run has a max_budget_usd, and the model claude-unpriced has no price to count its spend at (AGENT_BRIDGE_MODEL_PRICES)",
    });
    expect(await ask(await runOf({}), "claude-unpriced")).toBeNull();
    expect(await ask(await runOf(), "claude-unpriced")).toBeNull();
  });

  it("counts a call recorded twice once: a record tried again after a commit whose answer was lost", async () => {
    const runId = await runOf({ maxBudgetUsd: 1 });
    const call = randomUUID();
    await spend(runId, 0.25, call);
    await spend(runId, 0.25, call);
    expect(await listModelCalls(database.db, runId)).toHaveLength(1);
    const keyId = (await keyOfRun(database.db, runId)) as string;
    expect(await monthSpend(database.db, keyId, monthOf(new Date()))).toBe(0.25);
  });

  /** Another run in a session of the same key as `runId`'s. */
  async function insertSessionRunOf(runId: string): Promise<string> {
    return (await insertSessionRun(database.db, "more", await keyOfRun(database.db, runId))).id;
  }
});
