// Costs are USD kept to COST_DECIMALS places: a tenth of a nano-dollar, below the price of any
// token, and what the database's cost columns hold (src/store/schema.ts), so that their sums are
// exact. A cost an agent reports (a double, maybe the floating-point sum of its models' costs) is
// rounded to that once, when its run is recorded.

export const COST_DECIMALS = 10;

/** What the contract says of every cost field. */
export const COST_PRECISION =
  "USD to 10 decimal places: a run's cost is kept rounded to that, and every total is the exact sum of its runs' costs (added as decimals, with no floating-point drift), shown exactly up to $100 000 (a JSON number holds about 15 significant digits; beyond, the last decimal places round).";

/**
 * A reported cost at or above this is no run's (the columns hold less than 10^10 USD, and a sum
 * of such costs must fit too): it is taken as unknown, as a negative one is.
 */
const MAX_RUN_COST_USD = 1e6;

/**
 * The cost as the bridge keeps it: `usd` to COST_DECIMALS places (0.1 + 0.2 is 0.3); null (not
 * known) for what no run can cost, which a CLI that lies or breaks may report.
 */
export function exactCost(usd: number | null): number | null {
  if (usd === null || !Number.isFinite(usd) || usd < 0 || usd >= MAX_RUN_COST_USD) return null;
  return Number(usd.toFixed(COST_DECIMALS));
}
