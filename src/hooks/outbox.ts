import type { Clock } from "../clock.js";
import { errorText, type Logger } from "../log.js";
import type { Cidr } from "../net/targets.js";
import { CallbackTargets } from "../net/targets.js";
import type { RunTransactionHook } from "../runs/recording.js";
import * as store from "../store/callbacks.js";
import type { Database } from "../store/db.js";
import { publicErrorText } from "../store/errors.js";
import type { CallbackRow } from "../store/schema.js";
import { callbackHook } from "./callback-hook.js";
import { type PostOutcome, postCallback } from "./callback-post.js";
import { LEASE_MARGIN_MS, OUTBOX_BATCH, OutboxLoop, retryAfterFailure } from "./outbox-loop.js";
import { signStandard } from "./verify.js";

// Sends each finished run's callback from the outbox table: a POST of `{run, completion, text}`
// signed the Standard Webhooks way with the hook's callback secret. A failure or a timeout is
// retried with exponential backoff and jitter until `maxAttempts`; the state lives in the
// database, so a restart goes on where the last process stopped, and a 2xx is final.

export interface OutboxOptions {
  db: Database;
  logger: Logger;
  maxAttempts: number;
  backoffMinMs: number;
  backoffMaxMs: number;
  timeoutMs: number;
  pollMs: number;
  /** Inside addresses callbacks may reach all the same (AGENT_BRIDGE_CALLBACK_ALLOW). */
  allow: readonly Cidr[];
  /** The body of a run's callback (built once, at its first attempt). */
  buildBody: (runId: string) => Promise<string>;
  /** Times the polls, the backoff and the signature's timestamp. */
  clock?: Clock;
}

export class CallbackOutbox {
  private readonly loop: OutboxLoop;
  private readonly targets: CallbackTargets;

  constructor(private readonly opts: OutboxOptions) {
    this.targets = new CallbackTargets(opts.allow);
    this.loop = new OutboxLoop({
      name: "callback outbox",
      logger: opts.logger,
      pollMs: opts.pollMs,
      ...(opts.clock ? { clock: opts.clock } : {}),
      due: (now) => store.dueCallbacks(opts.db, now, OUTBOX_BATCH),
      attempt: (runId) => this.attempt(runId),
    });
  }

  start() {
    this.loop.start();
  }

  /**
   * Looks for due callbacks now (a run just completed); resolves once a pass that started after
   * the call has finished, so that what it sends has been sent (or tried).
   */
  poke(): Promise<void> {
    return this.loop.poke();
  }

  /**
   * A run's completion is stored: its callback goes out now rather than at the next poll. A run
   * that has none (its hooks known here, `joined`, and the callback's not among them) costs no
   * statement.
   */
  completed(joined: readonly RunTransactionHook[] | undefined): Promise<void> {
    return joined && !joined.includes(callbackHook) ? Promise.resolve() : this.poke();
  }

  /** Stops looking; an attempt in flight is abandoned and retried by the next process. */
  stop(): Promise<void> {
    return this.loop.stop();
  }

  private async attempt(runId: string) {
    const { db, logger, timeoutMs } = this.opts;
    const { clock } = this.loop;
    const now = new Date(clock.now());
    const row = await store.claimCallback(
      db,
      runId,
      now,
      new Date(now.getTime() + timeoutMs + LEASE_MARGIN_MS),
    );
    if (!row) return; // another worker took it
    let result: PostOutcome;
    try {
      let body = row.body;
      if (body === null) {
        body = await this.opts.buildBody(runId);
        await store.setCallbackBody(db, runId, body);
      }
      result = await this.send(row, body);
    } catch (err) {
      // Shown on the run: the database's own text (SQL, parameters) stays in the log.
      logger.error("could not prepare a callback", { run_id: runId, error: errorText(err) });
      result = {
        ok: false,
        status: null,
        error: `could not prepare the callback: ${publicErrorText(err)}`,
      };
    }
    if (result.ok) {
      await store.recordCallbackAttempt(db, runId, { state: "delivered", status: result.status });
      logger.info("callback delivered", { run_id: runId, attempts: row.attempts });
      return;
    }
    const next = retryAfterFailure(row.attempts, this.opts, clock.now(), {
      stopped: this.loop.isStopped,
    });
    await store.recordCallbackAttempt(db, runId, {
      state: next.failed ? "failed" : "pending",
      status: result.status,
      error: result.error,
      nextAttemptAt: new Date(next.at),
    });
    logger.warn(next.failed ? "callback failed for good" : "callback failed; will retry", {
      run_id: runId,
      attempts: row.attempts,
      error: result.error,
      ...(result.cause ? { cause: result.cause } : {}),
      ...(next.failed ? {} : { retry_in_ms: next.at - clock.now() }),
    });
  }

  private send(row: CallbackRow, body: string): Promise<PostOutcome> {
    const timestamp = Math.floor(this.loop.clock.now() / 1000);
    const headers = {
      "Content-Type": "application/json",
      "User-Agent": "agent-bridge",
      "webhook-id": row.runId,
      "webhook-timestamp": String(timestamp),
      "webhook-signature": signStandard(row.secret, row.runId, timestamp, body),
    };
    return postCallback(row.url, headers, body, {
      targets: this.targets,
      timeoutMs: this.opts.timeoutMs,
      stopping: this.loop.stopping,
    });
  }
}
