// Whether a metered call may go upstream: asked by the gateway before it forwards one, once its
// request (and so the model it asks for) is read. The answer is the bridge's policy
// (src/auth/policy.ts `callAdmission`): the run's key's monthly budget and model list, and the
// run's own cap. A refused call gets the API's own error; the run's completion then says why
// (src/agents/gateway-access.ts).

/** Why a call was refused: the completion's `error_code` of a run that ends for it, and words. */
export interface CallRefusal {
  code: "budget_exhausted" | "max_budget" | "policy_denied";
  message: string;
}

export interface CallAsk {
  runId: string;
  /** The model the request asks for; null when it names none. */
  model: string | null;
  /** The run's own cap on its spend (the session's or its message's `max_budget_usd`). */
  maxBudgetUsd: number | null;
}

/** Null: the call may go. */
export type Admission = (ask: CallAsk) => Promise<CallRefusal | null>;

/**
 * The status of a refusal: 402 for a budget (a status the CLIs report at once, as the API's
 * `billing_error`), 403 for a model the key may not use.
 */
export const refusalStatus = (refusal: CallRefusal) =>
  refusal.code === "policy_denied" ? 403 : 402;
