import { z } from "zod";
import { priceTable, usdRate } from "../env-fields.js";
import { DEFAULT_PRICES, type PriceTable } from "../prices.js";

// What the model gateway prices calls at.

export const gatewayEnv = {
  AGENT_BRIDGE_MODEL_PRICES: priceTable(
    z.strictObject({
      input: usdRate,
      output: usdRate,
      cache_read: usdRate,
      cache_creation: usdRate,
    }),
    '{"<model>": {"input": USD, "output": USD, "cache_read": USD, "cache_creation": USD}}',
  ).default({}),
};

/**
 * USD per million tokens by model: the built-in table, with the agents' own price settings
 * (`agentPrices`, in the plugins' order) and then AGENT_BRIDGE_MODEL_PRICES over it (an entry
 * replaces the model's).
 */
export function pricesSection(
  e: z.infer<z.ZodObject<typeof gatewayEnv>>,
  agentPrices: readonly PriceTable[],
): PriceTable {
  return Object.assign({}, DEFAULT_PRICES, ...agentPrices, e.AGENT_BRIDGE_MODEL_PRICES);
}
