import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestApp } from "../support/app.js";
import { REAL_CLI_BACKENDS } from "../support/db.js";
import { holdUntilReleased, type MockAnthropic } from "../support/mock-anthropic.js";
import { type RealClaudeApp, realClaudeApp } from "../support/real-claude.js";

// The real `claude` binary against the mock Messages API, cut by the run's wall-clock timeout: the
// CLI is asked to end its turn, as a cancel asks it, so that the run ends `timed_out` with the cost
// its `result` reports rather than killed with none.

/** Tokens that make one turn cost a noticeable amount at the CLI's prices. */
const COSTLY = { input_tokens: 100_000, output_tokens: 1_000 };

/**
 * The run's wall-clock limit, in seconds. The timed-out run must have had its first turn answered
 * before it (a cold CLI on a loaded machine has taken 3-5 s to its first request), and the test
 * lasts at least this long.
 */
const TIMEOUT_SECONDS = 10;

describe.each(REAL_CLI_BACKENDS)(
  "the wall-clock timeout with the real claude CLI on %s",
  (backend) => {
    let mock: MockAnthropic;
    let t: TestApp;

    let app: RealClaudeApp;
    beforeAll(async () => {
      app = await realClaudeApp(backend, {
        AGENT_BRIDGE_RUN_TIMEOUT_SECONDS: String(TIMEOUT_SECONDS),
      });
      ({ mock, t } = app);
    });
    afterAll(() => app.close());

    const newSession = async () =>
      (await (await t.app.request("/v1/sessions", { method: "POST" })).json()) as { id: string };
    /** Posts a message and waits for its run's end. */
    const send = async (sessionId: string, text: string) =>
      (await (
        await t.app.request(`/v1/sessions/${sessionId}/messages`, {
          method: "POST",
          headers: { "Content-Type": "application/json", Accept: "application/json" },
          body: JSON.stringify({ text }),
        })
      ).json()) as {
        run: { id: string; status: string; cost_usd: number | null };
        completion: { status: string; cost_usd: number | null; usage: Record<string, number> };
      };

    it("a run the timeout cuts ends timed_out with the cost its result reported: what its answered turn prices to", async () => {
      // What one turn of these tokens costs at the CLI's prices, from a run that finishes.
      mock.script({ blocks: [{ type: "text", text: "priced" }], usage: COSTLY });
      const priced = await send((await newSession()).id, "one turn");
      expect(priced.completion.status).toBe("succeeded");
      const turnCost = priced.completion.cost_usd ?? Number.NaN;
      expect(turnCost).toBeGreaterThan(0);

      // The same tokens in a turn that runs a command; the model's next answer never comes.
      const held = holdUntilReleased();
      mock.script(
        {
          blocks: [{ type: "tool_use", name: "Bash", input: { command: "echo ran" } }],
          usage: COSTLY,
        },
        { blocks: [{ type: "text", text: "never sent" }], hold: held.hold },
      );
      try {
        const cut = await send((await newSession()).id, "run it, then wait");
        expect(cut.completion).toMatchObject({
          status: "timed_out",
          error_code: "timed_out",
          error: `claude CLI timed out after ${TIMEOUT_SECONDS}s`,
          usage: { input_tokens: COSTLY.input_tokens, output_tokens: COSTLY.output_tokens },
        });
        // The CLI's own price of the turn it was answered, not null (a killed CLI reports none).
        expect(cut.completion.cost_usd).toBeCloseTo(turnCost, 9);
        expect(cut.run).toMatchObject({ status: "timed_out" });
        expect(cut.run.cost_usd).toBeCloseTo(turnCost, 9);
      } finally {
        held.release();
      }
    });
  },
);
