import { describe, expect, it } from "vitest";
import { costOf, DEFAULT_PRICES, priceOf } from "../src/prices.js";

// The price table the gateway and codex runs are priced by.

describe("model prices", () => {
  it("know the models the pinned CLIs use by default, a dated snapshot as its model", () => {
    // Claude Code 2.1.328's default model and its side requests' haiku; codex 0.171.0's default.
    for (const model of ["claude-opus-5-5", "claude-haiku-4-5-20251001", "gpt-6.2-sol"]) {
      expect(priceOf(DEFAULT_PRICES, model), model).toBeDefined();
    }
    expect(priceOf(DEFAULT_PRICES, "claude-haiku-4-5-20251001")).toBe(
      DEFAULT_PRICES["claude-haiku-4-5"],
    );
    expect(priceOf(DEFAULT_PRICES, "claude-unknown-1")).toBeUndefined();
    expect(priceOf(DEFAULT_PRICES, "constructor")).toBeUndefined();
    expect(priceOf(DEFAULT_PRICES, null)).toBeUndefined();
  });

  it("cost each kind of token at its rate, exactly to 10 decimal places; no price, no cost", () => {
    const tokens = {
      inputTokens: 1000,
      outputTokens: 200,
      cacheReadTokens: 30_000,
      cacheCreationTokens: 4000,
    };
    // 1000 × $4 + 200 × $20 + 30 000 × $0.20 + 4000 × $5, per million.
    expect(costOf(priceOf(DEFAULT_PRICES, "claude-opus-5-5"), tokens)).toBe(0.034);
    expect(
      costOf(
        { input: 0.1, output: 0.2, cache_read: 0, cache_creation: 0 },
        {
          ...tokens,
          inputTokens: 1,
          outputTokens: 1,
        },
      ),
    ).toBe(0.0000003);
    expect(costOf(undefined, tokens)).toBeNull();
  });
});
