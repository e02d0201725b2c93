import type { RunTransactionHook } from "../runs/recording.js";
import { insertCallback, markCallbackDue } from "../store/callbacks.js";

/**
 * A message's callback joins its run's transactions: the outbox row is written with the run, so
 * that no completion finds its callback missing, and becomes due with the completion, so that a
 * crash loses neither. The outbox (outbox.ts) sends what is due.
 */
export const callbackHook: RunTransactionHook = {
  joins: (message) => Boolean(message.callback),
  inserted: async (tx, run, message) => {
    if (message.callback) await insertCallback(tx, { runId: run.id, ...message.callback });
  },
  completed: (tx, run) => markCallbackDue(tx, run.id),
};
