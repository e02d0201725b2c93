import { describe, expect, it } from "vitest";
import { MAX_ASKED_WAIT_MS, retryAfterFailure } from "../../src/hooks/outbox-loop.js";

// When an outbox tries a failed send again.

const policy = { maxAttempts: 5, backoffMinMs: 100, backoffMaxMs: 60_000 };
const now = 1_700_000_000_000;

describe("the next attempt after a failure", () => {
  it("is when the other side asked, past the longest backoff too", () => {
    expect(retryAfterFailure(1, policy, now, { retryAt: now + 300_000, stopped: false }).at).toBe(
      now + 300_000,
    );
  });

  it("is never later than an hour from now, whatever the other side asked", () => {
    const far = now + 9_999_999_000;
    expect(retryAfterFailure(1, policy, now, { retryAt: far, stopped: false }).at).toBe(
      now + MAX_ASKED_WAIT_MS,
    );
  });

  it("is a backoff when nothing was asked, at once when stopping, and none after the last", () => {
    const { at } = retryAfterFailure(2, policy, now, { stopped: false });
    expect(at).toBeGreaterThan(now);
    expect(at).toBeLessThanOrEqual(now + 60_000);
    expect(retryAfterFailure(2, policy, now, { retryAt: now + 5000, stopped: true }).at).toBe(now);
    expect(retryAfterFailure(5, policy, now, { stopped: false }).failed).toBe(true);
  });
});
