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

/** The run whose calls are asked about. */
export interface RunAsk {
  runId: string;
  /** The run's own cap on its spend (the session's or its message's `max_budget_usd`). */
  maxBudgetUsd: number | null;
}

/** Whether a call may go, given the model its request asks for (null: it names none); null: it may. */
export type Ruling = (model: string | null) => CallRefusal | null;

/**
 * A call's admission: reads what it rests on (the spend so far, the key's policy) from when the
 * call arrives, while its request is still being read; resolves with the ruling on its model.
 */
export type CallAdmission = () => Promise<Ruling>;

/**
 * The admission of a run's calls, made as the run opens its access: what cannot change while the
 * run lives is read once, not before each of its calls.
 */
export type Admission = (run: RunAsk) => CallAdmission;

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
