import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueKey } from "../../src/auth/keys.js";
import { createLogger } from "../../src/log.js";
import type { KeyPolicyColumns } from "../../src/store/keys.js";
import { listModelCalls } from "../../src/store/model-calls.js";
import { createTestAppOn, fetchAs, listen, type TestApp } from "../support/app.js";
import { CODEX_TEST_MODEL, type CodexEnv, makeCodexEnv } from "../support/codex-env.js";
import { BACKENDS, openTestDatabase } from "../support/db.js";
import { type MockOpenAI, shellCall, startMockOpenAI } from "../support/mock-openai.js";

// What a key spends and which models it calls, at the model gateway, with the real codex CLI
// against the mock Responses API: a call past the key's cap, past the run's own, or for a model
// off the key's list is refused in OpenAI's own shape, codex gives up on it at once (it asks no
// second time) and fails its turn, and the run ends with the refusal's code and words; a call
// made before is charged. On each database, since the ledger is stored there.

/** Tokens that make a call cost $0.42 at the price the operator gives codex's model here. */
const COSTLY = { input_tokens: 100_000, cached_tokens: 0, output_tokens: 1_000 };
const COSTLY_USD = 0.42;

/** The turn that spends: codex runs a command, then calls again with its output. */
const spend = { output: [shellCall("echo spending")], usage: COSTLY };

interface Sent {
  status: number;
  body: { run: { id: string }; completion: Record<string, unknown> };
}

describe.each(BACKENDS)(
  "key spend and models at the model gateway with the real codex CLI on %s",
  (backend) => {
    let mock: MockOpenAI;
    let ce: CodexEnv;
    let t: TestApp;
    let server: { url: string; close(): Promise<void> };
    /** The server's log lines, as JSON. */
    const logged: Array<Record<string, unknown>> = [];

    beforeAll(async () => {
      mock = await startMockOpenAI({ quiet: true });
      ce = await makeCodexEnv(mock.url);
      t = createTestAppOn(
        await openTestDatabase(backend),
        {
          ...ce.env,
          AGENT_BRIDGE_AUTH: "keys",
          AGENT_BRIDGE_AGENT: "codex",
          AGENT_BRIDGE_WORK_DIR: ce.cwd,
          AGENT_BRIDGE_MODEL_PRICES: JSON.stringify({
            [CODEX_TEST_MODEL]: { input: 4, output: 20, cache_read: 0.4, cache_creation: 0 },
          }),
        },
        createLogger("info", {}, (line) => logged.push(JSON.parse(line))),
      );
      server = await listen(t.app);
    });
    afterAll(async () => {
      await server?.close();
      await t?.close();
      await mock?.close();
      await ce?.cleanup();
    });

    /** A key, a way to send messages (each in a session of its own), and what it reads back. */
    const tenant = async (policy: KeyPolicyColumns = {}) => {
      const { key } = await issueKey(t.database.db, { name: "tenant", admin: false, ...policy });
      const call = (path: string, init: RequestInit = {}) => fetchAs(server.url, key, path, init);
      return {
        /** Posts a message in a new session (made with `session`) and waits for its run's end. */
        send: async (
          text: string,
          settings: { session?: object; message?: object } = {},
        ): Promise<Sent> => {
          const session = (await (
            await call("/v1/sessions", {
              method: "POST",
              body: JSON.stringify(settings.session ?? {}),
            })
          ).json()) as { id: string };
          const res = await call(`/v1/sessions/${session.id}/messages`, {
            method: "POST",
            headers: { Accept: "application/json" },
            body: JSON.stringify({ text, ...settings.message }),
          });
          return { status: res.status, body: (await res.json()) as Sent["body"] };
        },
        get: async (path: string) => (await call(path)).json(),
      };
    };

    /** What the gateway refused of the run's calls: one entry a call. */
    const refusedCalls = (runId: string) =>
      logged.filter((line) => line.msg === "refused a model call" && line.run_id === runId);

    /** What the mock was asked for since `before`. */
    const askedSince = (before: number) =>
      mock.requests.slice(before).map((r) => `${r.method} ${r.path}`);

    it("refuses codex's call once its key's monthly cap is spent, with OpenAI's 429 insufficient_quota, which codex takes as final: the run ends budget_exhausted, and the call made before is charged", async () => {
      const { send, get } = await tenant({ maxBudgetUsd: COSTLY_USD });
      const before = mock.requests.length;
      mock.script(spend);
      const { status, body } = await send("spend it all");
      expect(status).toBe(200);
      expect(body.completion).toMatchObject({
        status: "failed",
        is_error: true,
        error_code: "budget_exhausted",
        error: expect.stringContaining(`the key's budget of $${COSTLY_USD}`),
        cost_usd: COSTLY_USD,
      });
      // codex's first call reached the upstream; its next, with the command's output, did not,
      // and codex did not ask again.
      expect(askedSince(before)).toEqual(["POST /v1/responses"]);
      expect(refusedCalls(body.run.id)).toEqual([
        expect.objectContaining({ code: "budget_exhausted" }),
      ]);
      expect(await listModelCalls(t.database.db, body.run.id)).toMatchObject([
        { model: CODEX_TEST_MODEL, status: 200, costUsd: COSTLY_USD },
      ]);
      expect(await get(`/v1/runs/${body.run.id}`)).toMatchObject({
        metered: { calls: 1, cost_usd: COSTLY_USD },
      });
      expect(await get("/v1/usage")).toMatchObject({
        cost_usd: COSTLY_USD,
        budget: { max_usd: COSTLY_USD, spent_usd: COSTLY_USD, left_usd: 0 },
      });
      // The key's next message starts no run.
      expect(await send("more")).toMatchObject({ status: 402 });
      expect(askedSince(before)).toHaveLength(1);
    });

    it("refuses codex's call for a model outside the key's list with OpenAI's 403, which codex takes as final: the run ends policy_denied; a listed model goes", async () => {
      const { send } = await tenant({ models: ["gpt-6.2-sol"] });
      const before = mock.requests.length;
      const { body } = await send("which model?");
      expect(body.completion).toMatchObject({
        status: "failed",
        error_code: "policy_denied",
        error: `the key's policy does not allow the model ${CODEX_TEST_MODEL}: it is not among its models (gpt-6.2-sol)`,
      });
      expect(askedSince(before)).toEqual([]);
      expect(refusedCalls(body.run.id)).toEqual([
        expect.objectContaining({ code: "policy_denied" }),
      ]);
      expect(await listModelCalls(t.database.db, body.run.id)).toEqual([]);

      const listed = await tenant({ models: [CODEX_TEST_MODEL] });
      mock.script({ output: [{ type: "message", text: "Allowed." }] });
      expect((await listed.send("this one")).body.completion).toMatchObject({
        status: "succeeded",
        result: "Allowed.",
      });
      expect(askedSince(before)).toEqual(["POST /v1/responses"]);
    });

    it("stops codex at the call that would pass the run's own max_budget_usd, its session's or its message's, the same way: the run ends max_budget", async () => {
      const { send } = await tenant();
      for (const settings of [
        { session: { max_budget_usd: COSTLY_USD } },
        { message: { max_budget_usd: COSTLY_USD } },
      ]) {
        const before = mock.requests.length;
        mock.script(spend);
        const { body } = await send("spend the run's cap", settings);
        expect(body.completion).toMatchObject({
          status: "failed",
          error_code: "max_budget",
          error: `the run's max_budget_usd of $${COSTLY_USD} is spent ($${COSTLY_USD})`,
          cost_usd: COSTLY_USD,
        });
        expect(askedSince(before)).toEqual(["POST /v1/responses"]);
        expect(refusedCalls(body.run.id)).toEqual([
          expect.objectContaining({ code: "max_budget" }),
        ]);
      }
    });
  },
);
