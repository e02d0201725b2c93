import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import { Inbox } from "../../src/process/driver/inbox.js";

// The driver's queue hands each item out once, in order, and holds none it has handed out: a
// parsed line holds slices of the whole chunk it was read from.

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

/** Whether nothing holds the object any more, after the current job and a full collection. */
async function collected(ref: WeakRef<object>): Promise<boolean> {
  await new Promise((resolve) => setImmediate(resolve));
  gc();
  return ref.deref() === undefined;
}

describe("the driver's inbox", () => {
  it("hands out its items in order, and wakes a reader waiting for the next", async () => {
    const inbox = new Inbox<number>();
    inbox.push(1);
    inbox.push(2);
    expect([inbox.shift(), inbox.shift(), inbox.shift()]).toEqual([1, 2, undefined]);
    const next = inbox.next();
    inbox.push(3);
    expect(await next).toBe(3);
    expect(inbox.length).toBe(0);
  });

  it("keeps its order across the compaction of a long queue", () => {
    const inbox = new Inbox<number>();
    for (let i = 0; i < 5000; i++) inbox.push(i);
    const taken: number[] = [];
    for (let i = 0; i < 3000; i++) taken.push(inbox.shift() as number);
    for (let i = 5000; i < 6000; i++) inbox.push(i);
    while (inbox.length > 0) taken.push(inbox.shift() as number);
    expect(taken).toEqual(Array.from({ length: 6000 }, (_, i) => i));
  });

  it("holds no item it has handed out, whether items are left or not", async () => {
    const inbox = new Inbox<object>();
    const refs = [{ n: 0 }, { n: 1 }, { n: 2 }].map((item) => {
      inbox.push(item);
      return new WeakRef(item);
    });
    inbox.shift();
    expect(await collected(refs[0] as WeakRef<object>)).toBe(true);
    expect(refs[1]?.deref()).toEqual({ n: 1 });
    inbox.shift();
    inbox.shift();
    expect(await collected(refs[1] as WeakRef<object>)).toBe(true);
    expect(await collected(refs[2] as WeakRef<object>)).toBe(true);
  });
});
