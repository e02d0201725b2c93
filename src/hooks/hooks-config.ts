// The hooks' section of the configuration (src/config/hooks.ts reads it from the environment).

import type { Cidr } from "../net/targets.js";

export interface HooksConfig {
  /** Largest webhook delivery body (GitHub sends up to 25 MB), apart from the API's limit. */
  deliveryLimitBytes: number;
  /** Largest rendered prompt (and system prompt, and session key) of a hook's run, in UTF-8 bytes. */
  promptMaxBytes: number;
  callback: {
    /** Tries of one callback, the first included, before it is `failed`. */
    maxAttempts: number;
    /** The wait after the first failure; it doubles each time, up to `backoffMaxMs`, jittered. */
    backoffMinMs: number;
    backoffMaxMs: number;
    /** One try that has no answer by then has failed. */
    timeoutMs: number;
    /** How often the outbox looks for due callbacks (a completion also wakes it). */
    pollMs: number;
    /** Inside addresses (loopback, private…) a callback may reach all the same. */
    allow: Cidr[];
  };
  /** How often the scheduler looks for due ticks. */
  scheduleTickMs: number;
  /**
   * The least time between two progress updates of a run's comment on its forge; its replies
   * are sent with the callback settings' attempts, backoff, timeout, poll and allowed addresses.
   */
  replyProgressMs: number;
  /**
   * Directories a checkout hook's origin may be a local path under (absolute); empty: https://
   * origins alone. The server's git reads them: no tenant may write them.
   */
  checkoutLocalOrigins: string[];
}
