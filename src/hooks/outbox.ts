import { backoffMs } from "../backoff.js";
import { type Clock, systemClock, type Timer } from "../clock.js";
import { errorText, type Logger } from "../log.js";
import type { Cidr } from "../net/targets.js";
import { CallbackTargets } from "../net/targets.js";
import * as store from "../store/callbacks.js";
import type { Database } from "../store/db.js";
import { publicErrorText } from "../store/errors.js";
import type { CallbackRow } from "../store/schema.js";
import { type PostOutcome, postCallback } from "./callback-post.js";
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

const BATCH = 16;
/** How long past its timeout a claimed attempt holds its row, should this process die sending. */
const LEASE_MARGIN_MS = 5000;

export class CallbackOutbox {
  private timer: Timer | undefined;
  private draining: Promise<void> | undefined;
  private again = false;
  /** Resolved when the pass asked for while one was running has finished. */
  private passAsked: (() => void)[] = [];
  private stopped = false;
  private readonly stopping = new AbortController();

  private readonly targets: CallbackTargets;
  private readonly clock: Clock;

  constructor(private readonly opts: OutboxOptions) {
    this.targets = new CallbackTargets(opts.allow);
    this.clock = opts.clock ?? systemClock;
  }

  start() {
    this.stopped = false;
    this.timer = this.clock.setInterval(() => this.poke(), this.opts.pollMs);
    this.timer.unref();
    void this.poke();
  }

  /**
   * Looks for due callbacks now (a run just completed); resolves once a pass that started after
   * the call has finished, so that what it sends has been sent (or tried).
   */
  poke(): Promise<void> {
    if (this.stopped) {
      for (const resolve of this.passAsked.splice(0)) resolve();
      return Promise.resolve();
    }
    if (this.draining) {
      this.again = true;
      return new Promise((resolve) => this.passAsked.push(resolve));
    }
    const asked = this.passAsked.splice(0);
    this.draining = this.drain()
      .catch((err) => this.opts.logger.error("callback outbox failed", { error: errorText(err) }))
      .finally(() => {
        this.draining = undefined;
        for (const resolve of asked) resolve();
        if (this.again) {
          this.again = false;
          void this.poke();
        }
      });
    return this.draining;
  }

  /** Stops looking; an attempt in flight is abandoned and retried by the next process. */
  async stop() {
    this.stopped = true;
    this.clock.clear(this.timer);
    this.stopping.abort();
    await this.draining;
  }

  private async drain() {
    while (!this.stopped) {
      const due = await store.dueCallbacks(this.opts.db, new Date(this.clock.now()), BATCH);
      if (due.length === 0) return;
      await Promise.all(due.map((runId) => this.attempt(runId)));
    }
  }

  private async attempt(runId: string) {
    const { db, logger, timeoutMs } = this.opts;
    const now = new Date(this.clock.now());
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
    const failed = row.attempts >= this.opts.maxAttempts;
    const wait = backoffMs(row.attempts, {
      firstMs: this.opts.backoffMinMs,
      maxMs: this.opts.backoffMaxMs,
      jitter: true,
    });
    await store.recordCallbackAttempt(db, runId, {
      state: failed ? "failed" : "pending",
      status: result.status,
      error: result.error,
      nextAttemptAt: new Date(this.clock.now() + (this.stopped ? 0 : wait)),
    });
    logger.warn(failed ? "callback failed for good" : "callback failed; will retry", {
      run_id: runId,
      attempts: row.attempts,
      error: result.error,
      ...(result.cause ? { cause: result.cause } : {}),
      ...(failed ? {} : { retry_in_ms: wait }),
    });
  }

  private send(row: CallbackRow, body: string): Promise<PostOutcome> {
    const timestamp = Math.floor(this.clock.now() / 1000);
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
      stopping: this.stopping.signal,
    });
  }
}
