import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueKey } from "../../src/auth/keys.js";
import type { KeyPolicyColumns } from "../../src/store/keys.js";
import { listModelCalls } from "../../src/store/model-calls.js";
import { fetchAs } from "../support/app.js";
import { BACKENDS } from "../support/db.js";
import type { MockTurn } from "../support/mock-anthropic.js";
import { type RealClaudeApp, realClaudeApp } from "../support/real-claude.js";

// What a key spends and which models it calls, at the model gateway, with the real claude CLI
// against the mock Messages API: each call is charged to the run's key as it is recorded, whatever
// the CLI then does or says; a call past the key's cap, or for a model off its list, is refused. On
// each database, since the ledger is stored there.

/** Tokens that make a call cost: $0.42 at claude-opus-5-5's price, the CLI's default model. */
const COSTLY = { input_tokens: 100_000, output_tokens: 1_000 };
const COSTLY_USD = 0.42;

/** A turn in which the agent makes its CLI vanish right after the call that asked for it. */
const killTheCli: MockTurn = {
  blocks: [{ type: "tool_use", name: "Bash", input: { command: "echo spending; kill -9 $PPID" } }],
  usage: COSTLY,
};

describe.each(BACKENDS)(
  "key spend and models at the model gateway with the real CLI on %s",
  (backend) => {
    let app: RealClaudeApp;

    beforeAll(async () => {
      app = await realClaudeApp(backend, { AGENT_BRIDGE_AUTH: "keys" });
    });
    afterAll(() => app.close());

    /** A key granted bypass, a way to send messages (each in a session of its own), and its spend. */
    const tenant = async (policy: KeyPolicyColumns = {}, on = app) => {
      const { key } = await issueKey(on.t.database.db, {
        name: "tenant",
        admin: false,
        permissionModes: ["bypassPermissions"],
        ...policy,
      });
      const call = (path: string, init: RequestInit = {}) =>
        fetchAs(on.server.url, key, path, init);
      return {
        /** Posts a message in a new session and waits for its run's end. */
        send: async (text: string) => {
          const session = (await (
            await call("/v1/sessions", {
              method: "POST",
              body: JSON.stringify({ permission_mode: "bypassPermissions" }),
            })
          ).json()) as { id: string };
          const res = await call(`/v1/sessions/${session.id}/messages`, {
            method: "POST",
            headers: { Accept: "application/json" },
            body: JSON.stringify({ text }),
          });
          return { status: res.status, body: await res.json() };
        },
        get: async (path: string) => (await call(path)).json(),
        spent: async () =>
          ((await (await call("/v1/usage")).json()) as { budget: { spent_usd: number } }).budget
            .spent_usd,
      };
    };

    /** What the run's metered calls cost. */
    const meteredCost = async (runId: string, on = app) =>
      (await listModelCalls(on.t.database.db, runId)).reduce((sum, c) => sum + (c.costUsd ?? 0), 0);

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
      });
      expect(await meteredCost(killed.body.run.id)).toBeCloseTo(COSTLY_USD, 9);
      expect(await spent()).toBeCloseTo(2 * COSTLY_USD, 9);
    });

    it("shows a run's metered calls beside what its CLI reported, and takes its usage and cost from them when its CLI was killed before reporting any", async () => {
      const { send, get } = await tenant();
      const metered = {
        calls: 1,
        input_tokens: 100_000,
        output_tokens: 1_000,
        cache_read_tokens: 0,
        cache_creation_tokens: 0,
        cost_usd: COSTLY_USD,
      };

      app.mock.script({ blocks: [{ type: "text", text: "Reported." }], usage: COSTLY });
      const reported = await send("report it");
      expect(reported.body.completion).toMatchObject({ status: "succeeded" });
      const shown = await get(`/v1/runs/${reported.body.run.id}`);
      // The CLI's own figures (its turn count, its API time) and the gateway's, side by side.
      expect(shown).toMatchObject({
        usage: { input_tokens: 100_000, output_tokens: 1_000, num_turns: 1 },
        completion: { cost_usd: expect.closeTo(COSTLY_USD, 9) },
        metered,
      });

      app.mock.script(killTheCli);
      const killed = await send("spend, then vanish");
      // The CLI reported nothing: the run's usage and cost are what was metered.
      expect(killed.body.completion).toMatchObject({
        status: "failed",
        error_code: "agent_exited",
        cost_usd: COSTLY_USD,
        usage: { input_tokens: 100_000, output_tokens: 1_000 },
      });
      expect(await get(`/v1/runs/${killed.body.run.id}`)).toMatchObject({
        cost_usd: COSTLY_USD,
        usage: { input_tokens: 100_000, output_tokens: 1_000 },
        metered,
      });
      const session = (await get(`/v1/sessions/${killed.body.run.session_id}`)) as {
        usage: { cost_usd: number };
      };
      expect(session.usage.cost_usd).toBe(COSTLY_USD);
    });

    it("adds what was metered to the session's totals and /v1/usage, whatever its CLI reported: the run keeps the CLI's own figures beside them", async () => {
      // The operator prices the model at twice what the CLI's own table says.
      const priced = await realClaudeApp(backend, {
        AGENT_BRIDGE_AUTH: "keys",
        AGENT_BRIDGE_MODEL_PRICES: JSON.stringify({
          "claude-opus-5-5": { input: 8, output: 40, cache_read: 0.8, cache_creation: 10 },
        }),
      });
      try {
        const { send, get } = await tenant({}, priced);
        priced.mock.script({ blocks: [{ type: "text", text: "Counted." }], usage: COSTLY });
        const run = await send("count it");
        expect(run.body.completion.cost_usd).toBeCloseTo(COSTLY_USD, 9);
        expect(await meteredCost(run.body.run.id, priced)).toBeCloseTo(2 * COSTLY_USD, 9);
        expect(await get(`/v1/runs/${run.body.run.id}`)).toMatchObject({
          cost_usd: run.body.completion.cost_usd,
          metered: { cost_usd: 2 * COSTLY_USD },
        });
        const session = (await get(`/v1/sessions/${run.body.run.session_id}`)) as {
          usage: Record<string, number>;
        };
        expect(session.usage).toMatchObject({
          cost_usd: 2 * COSTLY_USD,
          input_tokens: 100_000,
          output_tokens: 1_000,
        });
        expect(await get("/v1/usage")).toMatchObject({ cost_usd: 2 * COSTLY_USD });
      } finally {
        await priced.close();
      }
    });

    it("stops the issue's attack at the cap: four messages whose agent kills its CLI after its call are each charged, and the key's next message is refused once the cap is spent", async () => {
      // Room for two such calls, not three: the third run starts under the cap and ends past it.
      const { send, spent } = await tenant({ maxBudgetUsd: 2.5 * COSTLY_USD });
      const outcomes: unknown[] = [];
      for (const attack of ["attack one", "attack two", "attack three", "attack four"]) {
        // For this message's conversation only: a refused message leaves no turn for the next test.
        app.mock.scriptFor(attack, killTheCli);
        const { status, body } = await send(attack);
        outcomes.push(status === 200 ? body.completion.error_code : `${status} ${body.code}`);
      }
      expect(outcomes).toEqual([
        "agent_exited",
        "agent_exited",
        // Started under the cap (the CLI given what was left), it spent past it: the CLI may stop
        // itself at its --max-budget-usd before the agent's command runs.
        expect.stringMatching(/^(agent_exited|budget_exhausted)$/),
        "402 budget_exhausted",
      ]);
      // Each call is charged as far as its answer went: the third's input always (its answer's
      // start says it), its output too unless the CLI, seeing its own cap passed, cut the stream.
      const total = await spent();
      expect(total).toBeGreaterThanOrEqual(2 * COSTLY_USD + 0.4 - 1e-9);
      expect(total).toBeLessThanOrEqual(3 * COSTLY_USD + 1e-9);
    });

    it("refuses a call past the key's cap at the gateway, also one the agent makes with its run's token, and the run ends budget_exhausted", async () => {
      // $0.0008 a call at claude-opus-5-5's price: the CLI's first and one of the agent's fit.
      const cheap = { input_tokens: 100, output_tokens: 20 };
      const { send, spent } = await tenant({ maxBudgetUsd: 0.0015 });
      const before = app.mock.requests.length;
      const body = JSON.stringify({
        model: "claude-opus-5-5",
        max_tokens: 10,
        messages: [{ role: "user", content: "more" }],
      });
      app.mock.script({
        blocks: [
          {
            type: "tool_use",
            name: "Bash",
            input: {
              command: `for i in 1 2 3; do curl -s -o /dev/null -w '%{http_code} ' -H "x-api-key: $ANTHROPIC_API_KEY" -H 'content-type: application/json' -d '${body}' "$ANTHROPIC_BASE_URL/v1/messages"; done`,
            },
          },
        ],
        usage: cheap,
      });
      const { body: answer } = await send("spend it all");
      expect(answer.completion).toMatchObject({
        status: "failed",
        is_error: true,
        error_code: "budget_exhausted",
        error: expect.stringContaining("the key's budget of $0.0015"),
      });
      // The CLI's call and the agent's first reached the upstream; the agent's second and third
      // were refused, and so was the CLI's next.
      expect(app.mock.requests.slice(before).map((r) => r.kind)).toEqual(["main", "side"]);
      const calls = await listModelCalls(app.t.database.db, answer.run.id);
      expect(calls.map((c) => c.costUsd)).toEqual([0.0008, 0.0008]);
      expect(await spent()).toBeCloseTo(0.0016, 9);
    });

    it("refuses a call for a model outside the key's list with the API's 403, and the run ends policy_denied; a listed model goes", async () => {
      // The CLI's default model, claude-opus-5-5, is not on the list.
      const { send } = await tenant({ models: ["claude-haiku-4-5"] });
      const before = app.mock.requests.length;
      const { body } = await send("which model?");
      expect(body.completion).toMatchObject({
        status: "failed",
        error_code: "policy_denied",
        error:
          "the key's policy does not allow the model claude-opus-5-5: it is not among its models (claude-haiku-4-5)",
      });
      expect(app.mock.requests.slice(before).filter((r) => r.path === "/v1/messages")).toEqual([]);
      expect(await listModelCalls(app.t.database.db, body.run.id)).toEqual([]);

      const listed = await tenant({ models: ["claude-opus-5-5"] });
      app.mock.script({ blocks: [{ type: "text", text: "Allowed." }] });
      expect((await listed.send("this one")).body.completion).toMatchObject({
        status: "succeeded",
        result: "Allowed.",
      });
    });
  },
);
