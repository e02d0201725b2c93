import { describe, expect, it } from "vitest";
import { ManualClock } from "./manual-clock.js";

// The tests' manual clock: time moves only on `advance`, timers fire in time order with the clock
// at their time, and the work a timer returns has settled when `advance` resolves.

describe("the manual clock", () => {
  it("stands still until advanced, and fires nothing before its time", async () => {
    const clock = new ManualClock(1_000);
    const fired: number[] = [];
    clock.setTimeout(() => void fired.push(clock.now()), 100);
    await new Promise((r) => setTimeout(r, 20));
    expect(clock.now()).toBe(1_000);
    expect(fired).toEqual([]);
    await clock.advance(99);
    expect(clock.now()).toBe(1_099);
    expect(fired).toEqual([]);
    await clock.advance(1);
    expect(fired).toEqual([1_100]);
    expect(clock.pending).toBe(0);
  });

  it("fires due timers in time order, then in the order they were set, each at its own time", async () => {
    const clock = new ManualClock(0);
    const fired: string[] = [];
    clock.setTimeout(() => void fired.push(`c@${clock.now()}`), 300);
    clock.setTimeout(() => void fired.push(`a@${clock.now()}`), 100);
    clock.setTimeout(() => void fired.push(`b1@${clock.now()}`), 200);
    clock.setTimeout(() => void fired.push(`b2@${clock.now()}`), 200);
    await clock.advanceTo(250);
    expect(fired).toEqual(["a@100", "b1@200", "b2@200"]);
    expect(clock.now()).toBe(250);
    await clock.advanceTo(new Date(300));
    expect(fired).toEqual(["a@100", "b1@200", "b2@200", "c@300"]);
  });

  it("fires an interval at each of its times until it is cleared", async () => {
    const clock = new ManualClock(0);
    const fired: number[] = [];
    const timer = clock.setInterval(() => void fired.push(clock.now()), 100);
    await clock.advance(350);
    expect(fired).toEqual([100, 200, 300]);
    clock.clear(timer);
    await clock.advance(1_000);
    expect(fired).toEqual([100, 200, 300]);
    expect(clock.pending).toBe(0);
  });

  it("fires no timeout that was cleared, nor one a timer before it clears", async () => {
    const clock = new ManualClock(0);
    const fired: string[] = [];
    const cleared = clock.setTimeout(() => void fired.push("cleared"), 50);
    clock.clear(cleared);
    const later = clock.setTimeout(() => void fired.push("later"), 200);
    clock.setTimeout(() => {
      fired.push("first");
      clock.clear(later);
    }, 100);
    clock.clear(undefined);
    await clock.advance(500);
    expect(fired).toEqual(["first"]);
  });

  it("fires a timer set by a firing one when it falls due within the same advance", async () => {
    const clock = new ManualClock(0);
    const fired: number[] = [];
    clock.setTimeout(() => {
      fired.push(clock.now());
      clock.setTimeout(() => void fired.push(clock.now()), 100);
    }, 100);
    await clock.advance(250);
    expect(fired).toEqual([100, 200]);
  });

  it("resolves once the work a timer returns, and what it starts at once, has settled", async () => {
    const clock = new ManualClock(0);
    const done: string[] = [];
    clock.setTimeout(async () => {
      await new Promise((r) => setTimeout(r, 30));
      done.push("returned");
      void Promise.resolve().then(() => done.push("started"));
    }, 10);
    await clock.advance(10);
    expect(done).toEqual(["returned", "started"]);
  });

  it("does not go back", async () => {
    const clock = new ManualClock(100);
    await expect(clock.advanceTo(50)).rejects.toThrow(/does not go back/);
  });
});
