import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Usage } from "../../src/events.js";
import { insertKey, monthOf, monthSpend } from "../../src/store/keys.js";
import { meteredSpend, meteredUsage, recordModelCall } from "../../src/store/model-calls.js";
import { finishRun } from "../../src/store/run-lifecycle.js";
import { BACKENDS, insertSessionRun, openTestDatabase, type TestDatabase } from "../support/db.js";

// A run's spend is decided by one rule written twice: in JavaScript (meteredSpend, what the
// gateway puts in the completion of a CLI that reported nothing) and in SQL (finishRun, what the
// session's totals and the key's month add). Each case here is a run's metered calls and what its
// CLI reported; both must come to the same figures.

interface Call {
  tokens: [input: number, output: number, cacheRead: number, cacheCreation: number];
  /** Null: the call's model has no price. */
  costUsd: number | null;
}

const usage = (input: number, output: number, cacheRead = 0, cacheCreation = 0): Usage => ({
  input_tokens: input,
  output_tokens: output,
  cache_read_tokens: cacheRead,
  cache_creation_tokens: cacheCreation,
  num_turns: 1,
  duration_api_ms: 10,
});

/** A call of a priced model, and one of a model without a price. */
const priced: Call = { tokens: [1000, 200, 30, 4], costUsd: 0.0123 };
const unpriced: Call = { tokens: [700, 70, 7, 0], costUsd: null };

const cases: { name: string; calls: Call[]; reported: Usage; reportedUsd: number | null }[] = [
  { name: "no call metered", calls: [], reported: usage(100, 20, 5, 1), reportedUsd: 0.25 },
  {
    name: "every call priced",
    calls: [priced, { tokens: [500, 50, 0, 0], costUsd: 0.0045 }],
    reported: usage(9, 9),
    reportedUsd: 0.5,
  },
  {
    name: "priced and unpriced calls",
    calls: [priced, unpriced],
    reported: usage(9, 9),
    reportedUsd: 0.5,
  },
  {
    name: "priced and unpriced calls, and a CLI that reported no cost",
    calls: [priced, unpriced],
    reported: usage(0, 0),
    reportedUsd: null,
  },
  {
    name: "unpriced calls only",
    calls: [{ tokens: [300, 30, 3, 3], costUsd: null }],
    reported: usage(9, 9),
    reportedUsd: 0.125,
  },
  {
    name: "priced calls, and a CLI that reported no cost",
    calls: [{ tokens: [300, 30, 3, 3], costUsd: 0.003 }],
    reported: usage(0, 0),
    reportedUsd: null,
  },
];

describe.each(BACKENDS)("a run's spend on %s", (backend) => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await openTestDatabase(backend);
  });
  afterAll(() => database.destroy());

  it.each(cases)(
    "comes to the same figures in the completion and the totals: $name",
    async ({ calls, reported, reportedUsd }) => {
      const { db } = database;
      const key = await insertKey(db, {
        name: "spender",
        admin: false,
        hash: randomUUID(),
        prefix: "p",
      });
      const run = await insertSessionRun(db, "hi", key.id);
      const at = new Date();
      for (const { tokens, costUsd } of calls) {
        const [inputTokens, outputTokens, cacheReadTokens, cacheCreationTokens] = tokens;
        await recordModelCall(
          db,
          {
            id: randomUUID(),
            runId: run.id,
            endpoint: "/v1/messages",
            model: costUsd === null ? "unpriced-model" : "priced-model",
            inputTokens,
            outputTokens,
            cacheReadTokens,
            cacheCreationTokens,
            costUsd,
            status: 200,
            error: null,
            requestId: null,
            startedAt: at,
            durationMs: 5,
          },
          at,
        );
      }
      const month = monthOf(at);
      const chargedByCalls = await monthSpend(db, key.id, month);
      const metered = await meteredUsage(db, run.id);
      const expected = meteredSpend(reported, reportedUsd, metered);

      const totals = await finishRun(db, run, {
        status: "succeeded",
        usage: reported,
        costUsd: reportedUsd,
        durationMs: 20,
        agentSessionId: null,
        lastMessageUuid: null,
        exitCode: 0,
      });

      expect(totals).toMatchObject({
        input_tokens: expected.usage.input_tokens,
        output_tokens: expected.usage.output_tokens,
        cache_read_tokens: expected.usage.cache_read_tokens,
        cache_creation_tokens: expected.usage.cache_creation_tokens,
        runs: 1,
      });
      expect(totals?.cost_usd).toBeCloseTo(expected.costUsd ?? 0, 10);
      // The key's month: each metered call's cost as it was recorded; the CLI's report only when
      // no call was metered.
      const charged = (await monthSpend(db, key.id, month)) - chargedByCalls;
      expect(charged).toBeCloseTo(calls.length === 0 ? (reportedUsd ?? 0) : 0, 10);
    },
  );
});
