import { exactCost } from "./money.js";

// What a model's tokens cost, for the calls the model gateway meters (src/gateway/) and the runs
// of a CLI that reports no cost of its own (codex). The table below knows the models the pinned
// CLIs use by default and their neighbours; the operator's AGENT_BRIDGE_MODEL_PRICES adds to it
// and replaces its entries (src/config.ts). A model without a price costs null, never a guess.

/** USD per million tokens of one model. */
export interface ModelPrice {
  /** Input tokens read neither from nor into the prompt cache. */
  input: number;
  output: number;
  cache_read: number;
  /** Input tokens written to the prompt cache (Anthropic: the 5-minute cache's rate). */
  cache_creation: number;
}

export type PriceTable = Readonly<Record<string, ModelPrice>>;

/** Tokens as the bridge counts them everywhere: input apart from what the cache read or wrote. */
export interface TokenCounts {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheCreationTokens: number;
}

const price = (input: number, output: number, cacheRead: number, cacheCreation: number) => ({
  input,
  output,
  cache_read: cacheRead,
  cache_creation: cacheCreation,
});

/**
 * The built-in prices. Anthropic's are those Claude Code 2.1.328 carries in its model catalog (its
 * default is claude-opus-5-5; its side requests use a haiku); OpenAI's are those of the models'
 * pages at developers.openai.com (codex 0.171.0's default is gpt-6.2-sol), at standard rates up to
 * 272K input tokens.
 */
export const DEFAULT_PRICES: PriceTable = {
  "claude-opus-5-5": price(4, 20, 0.2, 5),
  "claude-opus-5": price(5, 25, 0.5, 6.25),
  "claude-opus-4-8": price(5, 25, 0.5, 6.25),
  "claude-opus-4-7": price(5, 25, 0.5, 6.25),
  "claude-opus-4-6": price(5, 25, 0.5, 6.25),
  "claude-opus-4-5": price(5, 25, 0.5, 6.25),
  "claude-sonnet-5-5": price(2, 10, 0.1, 2.5),
  "claude-sonnet-5": price(2, 10, 0.2, 2.5),
  "claude-sonnet-4-6": price(3, 15, 0.3, 3.75),
  "claude-sonnet-4-5": price(3, 15, 0.3, 3.75),
  "claude-haiku-5-5": price(0.1, 0.5, 0.01, 0.125),
  "claude-haiku-4-5": price(1, 5, 0.1, 1.25),
  "gpt-6.2-sol": price(2, 10, 0.1, 2.5),
  "gpt-6.1-sol": price(2, 10, 0.1, 2.5),
  "gpt-6-sol": price(2, 10, 0.2, 2.5),
  "gpt-6-luna": price(0.1, 0.5, 0.01, 0.125),
  "gpt-6-astra": price(10, 50, 1, 12.5),
};

/** A dated snapshot's name (`claude-haiku-4-5-20251001`) is priced as its model's. */
const SNAPSHOT_DATE = /-\d{8}$/;

/** The model's price: by its name, else its snapshot's model's; undefined when it has none. */
export function priceOf(table: PriceTable, model: string | null): ModelPrice | undefined {
  if (model === null) return undefined;
  const name = Object.hasOwn(table, model) ? model : model.replace(SNAPSHOT_DATE, "");
  return Object.hasOwn(table, name) ? table[name] : undefined;
}

/** What the tokens cost at `price`, in USD as the bridge keeps costs; null without a price. */
export function costOf(price: ModelPrice | undefined, tokens: TokenCounts): number | null {
  if (!price) return null;
  const usd =
    tokens.inputTokens * price.input +
    tokens.outputTokens * price.output +
    tokens.cacheReadTokens * price.cache_read +
    tokens.cacheCreationTokens * price.cache_creation;
  return exactCost(usd / 1e6);
}
