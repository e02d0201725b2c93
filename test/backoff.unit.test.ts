import { describe, expect, it } from "vitest";
import { backoffMs } from "../src/backoff.js";

describe("the back-off", () => {
  it("doubles from the first wait and stops at the longest", () => {
    const waits = [1, 2, 3, 4, 5, 6, 7, 50].map((n) =>
      backoffMs(n, { firstMs: 50, maxMs: 2000, jitter: false }),
    );
    expect(waits).toEqual([50, 100, 200, 400, 800, 1600, 2000, 2000]);
  });

  it("waits the first wait before any failure is counted", () => {
    expect(backoffMs(0, { firstMs: 50, maxMs: 2000, jitter: false })).toBe(50);
  });

  it("with jitter, waits a whole number of milliseconds in the upper half of each wait", () => {
    for (let n = 1; n <= 12; n++) {
      const full = Math.min(30_000, 1000 * 2 ** (n - 1));
      for (let i = 0; i < 50; i++) {
        const wait = backoffMs(n, { firstMs: 1000, maxMs: 30_000, jitter: true });
        expect(Number.isInteger(wait)).toBe(true);
        expect(wait).toBeGreaterThanOrEqual(full / 2);
        expect(wait).toBeLessThanOrEqual(full);
      }
    }
  });
});
