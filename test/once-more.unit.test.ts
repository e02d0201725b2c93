import { describe, expect, it } from "vitest";
import { OnceMore } from "../src/once-more.js";

describe("OnceMore", () => {
  it("runs once more after the run in progress, however often it was asked meanwhile, never two at once", async () => {
    let runs = 0;
    let inside = 0;
    let most = 0;
    let release = () => {};
    const task = new OnceMore(async () => {
      runs += 1;
      inside += 1;
      most = Math.max(most, inside);
      if (runs === 1) await new Promise<void>((resolve) => (release = resolve));
      inside -= 1;
    });
    const first = task.run();
    const asked = [task.run(), task.run(), task.run()];
    release();
    await Promise.all([first, ...asked]);
    expect({ runs, most }).toEqual({ runs: 2, most: 1 });
    await task.run();
    expect(runs).toBe(3);
  });
});
