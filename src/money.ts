// Costs are USD kept to COST_DECIMALS places: a tenth of a nano-dollar, below the price of any
// token, and what the database's cost columns hold (src/store/schema.ts), so that their sums are
// exact. A cost an agent reports (a double, maybe the floating-point sum of its models' costs) is
// rounded to that once, when its run is recorded.

export const COST_DECIMALS = 10;

/** What the contract says of every cost field. */
export const COST_PRECISION =
  "USD to 10 decimal places: a run's cost is kept rounded to that, and every total is the exact sum of its runs' costs (added as decimals, with no floating-point drift).";

/** The cost as the bridge keeps it: `usd` to COST_DECIMALS places (0.1 + 0.2 is 0.3). */
export function exactCost(usd: number): number {
  return Number(usd.toFixed(COST_DECIMALS));
}
