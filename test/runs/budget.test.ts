import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueKey } from "../../src/auth/keys.js";
import { agentMatrix } from "../support/agents.js";
import { createTestApp, requestAs, type TestApp } from "../support/app.js";
import type { FakeCli } from "../support/fake-cli.js";
import { heldReply } from "../support/fake-scenarios.js";
import { SseReader } from "../support/sse.js";

// What the real CLI cannot be made to do on demand: hold a run until the test lets it finish, so
// that another run of the same key waits in the queue meanwhile. The budget is asked again when a
// run's turn comes: one queued while the key's other run spent the budget does not start.

describe.each(agentMatrix)(
  "a run whose key spent its budget while it was queued, $agent on $db",
  (agent) => {
    let t: TestApp;
    let fake: FakeCli;
    let dir: string;

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), "agent-bridge-budget-"));
      // $2: claude says so, codex's fake model costs $1 per million input tokens.
      fake = await agent.fake(
        heldReply(join(dir, "go"), ["spent"], {
          costUsd: 2,
          usage: { input: 2_000_000, output: 0 },
        }),
      );
      t = await createTestApp(agent.db, {
        ...fake.bridgeEnv,
        AGENT_BRIDGE_AUTH: "keys",
        AGENT_BRIDGE_MAX_CONCURRENT_RUNS: "1",
      });
    });
    afterAll(async () => {
      await t.close();
      await fake.cleanup();
      rmSync(dir, { recursive: true, force: true });
    });

    it("ends failed with error_code budget_exhausted when its turn comes, no CLI starts for it, and deleting the spender's session gives nothing back", async () => {
      const { key } = await issueKey(t.database.db, {
        name: "capped",
        admin: false,
        maxBudgetUsd: 1,
      });
      const as = (path: string, init: RequestInit = {}) => requestAs(t.app, key, path, init);
      const startRun = async () => {
        const session = await (await as("/v1/sessions", { method: "POST" })).json();
        const res = await as(`/v1/sessions/${session.id}/messages`, {
          method: "POST",
          headers: { "Content-Type": "application/json", Prefer: "respond-async" },
          body: JSON.stringify({ text: "spend" }),
        });
        expect(res.status).toBe(202);
        return (await res.json()).id as string;
      };
      const spender = await startRun();
      await fake.waitForMark("working");
      // Admitted while nothing is spent yet; queued behind the spender (one slot).
      const queued = await startRun();
      expect((await (await as(`/v1/runs/${queued}`)).json()).status).toBe("queued");
      const ending = SseReader.of(await as(`/v1/runs/${queued}/events`)).until("completion");
      writeFileSync(join(dir, "go"), "");

      await ending;
      expect((await (await as(`/v1/runs/${spender}`)).json()).status).toBe("succeeded");
      const run = await (await as(`/v1/runs/${queued}`)).json();
      expect(run.status).toBe("failed");
      expect(run.completion).toMatchObject({
        status: "failed",
        error_code: "budget_exhausted",
        cost_usd: 0,
      });
      expect(run.completion.error).toContain("budget of $1");
      expect(await fake.invocations()).toHaveLength(1);
    });
  },
);
