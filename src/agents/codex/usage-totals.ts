import type { Usage } from "../../events.js";
import { costOf, type ModelPrice } from "../../prices.js";
import { int, isRecord } from "../line-fields.js";

// What a codex run used. `turn.completed.usage` is the thread's running total (it counts every
// earlier turn after `exec resume`), so a run's own usage is the difference from the totals its
// previous run ended with.

/** `turn.completed.usage` of codex-cli 0.171.0: running totals over the thread. */
export interface CodexUsageTotals {
  input_tokens: number;
  cached_input_tokens: number;
  cache_write_input_tokens: number;
  output_tokens: number;
  reasoning_output_tokens: number;
}

export const ZERO_CODEX_USAGE: CodexUsageTotals = {
  input_tokens: 0,
  cached_input_tokens: 0,
  cache_write_input_tokens: 0,
  output_tokens: 0,
  reasoning_output_tokens: 0,
};

export function totalsOf(usage: unknown): CodexUsageTotals {
  const u = isRecord(usage) ? usage : {};
  return {
    input_tokens: int(u.input_tokens),
    cached_input_tokens: int(u.cached_input_tokens),
    cache_write_input_tokens: int(u.cache_write_input_tokens),
    output_tokens: int(u.output_tokens),
    reasoning_output_tokens: int(u.reasoning_output_tokens),
  };
}

/**
 * This run's share of the thread's totals. Totals below the previous ones mean the previous
 * totals are not this thread's baseline (another thread, or a history codex rebuilt): then the
 * totals are all this run's.
 */
export function runShare(totals: CodexUsageTotals, previous: CodexUsageTotals): CodexUsageTotals {
  const keys = Object.keys(totals) as Array<keyof CodexUsageTotals>;
  if (keys.some((k) => totals[k] < previous[k])) return totals;
  const share = { ...totals };
  for (const k of keys) share[k] = totals[k] - previous[k];
  return share;
}

/**
 * The bridge's usage: its `input_tokens` are the uncached ones (as Anthropic counts them),
 * while OpenAI's `input_tokens` include the cached ones.
 */
export function bridgeUsage(run: CodexUsageTotals): Usage {
  return {
    input_tokens: Math.max(0, run.input_tokens - run.cached_input_tokens),
    output_tokens: run.output_tokens,
    cache_read_tokens: run.cached_input_tokens,
    cache_creation_tokens: run.cache_write_input_tokens,
    // One codex turn per run (codex does not count its model requests).
    num_turns: 1,
    duration_api_ms: 0,
  };
}

/** The run's cost at its model's price; null without one. */
export function runCost(price: ModelPrice | undefined, run: CodexUsageTotals): number | null {
  // Cache writes are among the uncached input tokens, and billed as input.
  return costOf(price, {
    inputTokens: Math.max(0, run.input_tokens - run.cached_input_tokens),
    outputTokens: run.output_tokens,
    cacheReadTokens: run.cached_input_tokens,
    cacheCreationTokens: 0,
  });
}
