import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueKey } from "../../src/auth/keys.js";
import type { KeyPolicyColumns } from "../../src/store/keys.js";
import { listModelCalls } from "../../src/store/model-calls.js";
import { fetchAs } from "../support/app.js";
import { BACKENDS } from "../support/db.js";
import type { MockTurn } from "../support/mock-anthropic.js";
import { type RealClaudeApp, realClaudeApp } from "../support/real-claude.js";

// What a key spends, counted at the model gateway with the real claude CLI against the mock
// Messages API: each call is charged to the run's key as it is recorded, whatever the CLI then does
// or says. On each database, since the ledger is stored there.

/** Tokens that make a call cost: $0.42 at claude-opus-5-5's price, the CLI's default model. */
const COSTLY = { input_tokens: 100_000, output_tokens: 1_000 };
const COSTLY_USD = 0.42;

/** A turn in which the agent makes its CLI vanish right after the call that asked for it. */
const killTheCli: MockTurn = {
  blocks: [{ type: "tool_use", name: "Bash", input: { command: "echo spending; kill -9 $PPID" } }],
  usage: COSTLY,
};

describe.each(BACKENDS)("key spend from the model gateway with the real CLI on %s", (backend) => {
  let app: RealClaudeApp;

  beforeAll(async () => {
    app = await realClaudeApp(backend, { AGENT_BRIDGE_AUTH: "keys" });
  });
  afterAll(() => app.close());

  /** A key granted bypass, its session, and a way to send it messages and read its spend. */
  const tenant = async (policy: KeyPolicyColumns = {}) => {
    const { key } = await issueKey(app.t.database.db, {
      name: "tenant",
      admin: false,
      permissionModes: ["bypassPermissions"],
      ...policy,
    });
    const call = (path: string, init: RequestInit = {}) => fetchAs(app.server.url, key, path, init);
    const session = (await (
      await call("/v1/sessions", {
        method: "POST",
        body: JSON.stringify({ permission_mode: "bypassPermissions" }),
      })
    ).json()) as { id: string };
    return {
      /** Posts a message and waits for its run's end. */
      send: async (text: string) => {
        const res = await call(`/v1/sessions/${session.id}/messages`, {
          method: "POST",
          headers: { Accept: "application/json" },
          body: JSON.stringify({ text }),
        });
        return { status: res.status, body: await res.json() };
      },
      spent: async () =>
        ((await (await call("/v1/usage")).json()) as { budget: { spent_usd: number } }).budget
          .spent_usd,
    };
  };

  /** What the run's metered calls cost. */
  const meteredCost = async (runId: string) =>
    (await listModelCalls(app.t.database.db, runId)).reduce((sum, c) => sum + (c.costUsd ?? 0), 0);

  it("charges each call to the run's key as it is made: once for a run that ends well, and for one whose agent kills its CLI after the call", async () => {
    const { send, spent } = await tenant({ maxBudgetUsd: 100 });

    app.mock.script({ blocks: [{ type: "text", text: "Paid for." }], usage: COSTLY });
    const paid = await send("one call");
    expect(paid.body.completion).toMatchObject({ status: "succeeded" });
    // The CLI reports what it spent; the key is charged what was metered, not both.
    expect(paid.body.completion.cost_usd).toBeCloseTo(COSTLY_USD, 9);
    expect(await meteredCost(paid.body.run.id)).toBeCloseTo(COSTLY_USD, 9);
    expect(await spent()).toBeCloseTo(COSTLY_USD, 9);

    app.mock.script(killTheCli);
    const killed = await send("spend, then vanish");
    expect(killed.body.completion).toMatchObject({
      status: "failed",
      error_code: "agent_exited",
      cost_usd: null,
    });
    expect(await meteredCost(killed.body.run.id)).toBeCloseTo(COSTLY_USD, 9);
    expect(await spent()).toBeCloseTo(2 * COSTLY_USD, 9);
  });
});
