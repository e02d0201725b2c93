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
 * The statuses a model API refuses a call with, each the one its CLI takes as final and reports
 * at once: one for a budget (the key's or the run's own), one for a model the key may not use.
 */
export interface RefusalStatuses {
  budget: number;
  model: number;
}

/** The status of a refusal, in the API's own terms. */
export const refusalStatus = (refusal: CallRefusal, statuses: RefusalStatuses) =>
  refusal.code === "policy_denied" ? statuses.model : statuses.budget;
