import type { RunTransactionHook } from "../runs/recording.js";
import { insertReplies, markRepliesFinal } from "../store/replies.js";

/**
 * A delivery's replies join its run's transactions, as its callback does (callback-hook.ts): the
 * outbox rows are written with the run and say its result once its completion is recorded. Their
 * start and progress come from the run's stored events (ReplyOutbox.progressed).
 */
export const replyHook: RunTransactionHook = {
  joins: (message) => (message.replies?.length ?? 0) > 0,
  inserted: (tx, run, message) => insertReplies(tx, run.id, message.replies ?? []),
  completed: (tx, run) => markRepliesFinal(tx, run.id),
};
