import { EventEmitter, once } from "node:events";
import { describe, expect, it } from "vitest";
import { Admission, type AdmissionLimits, type Admittable } from "../../src/runs/admission.js";
import {
  QueueFullError,
  SessionBusyError,
  SessionGoneError,
  ShuttingDownError,
} from "../../src/runs/errors.js";

// Admission alone, in memory: no database, no process. The store's part (promoting a waiting run to
// its session's queued run) is a handler here that says "promoted".

type Run = Admittable;

function run(id: string, sessionId = `session-${id}`, keyId: string | null = null): Run {
  return { id, sessionId, keyId };
}

function admissionWith(limits: Partial<AdmissionLimits> = {}) {
  const events = new EventEmitter();
  const started: Run[] = [];
  const left: Run[] = [];
  const promoted: Run[] = [];
  const failures: unknown[] = [];
  const admission = new Admission<Run>(
    { maxConcurrent: 1, maxQueued: 10, ...limits },
    {
      start: (r) => {
        started.push(r);
        events.emit("start", r);
      },
      promote: async (r) => {
        promoted.push(r);
        return "promoted";
      },
      left: (r) => left.push(r),
      failed: (_sessionId, err) => failures.push(err),
    },
  );
  /** Resolves with the next run to start; ask before what starts it. */
  const nextStart = async () => ((await once(events, "start")) as [Run])[0];
  return { admission, started, left, promoted, failures, nextStart };
}

describe("admission", () => {
  it("starts runs up to maxConcurrent, queues up to maxQueued, then refuses with QueueFullError and a wait", () => {
    const { admission, started } = admissionWith({ maxConcurrent: 2, maxQueued: 1 });
    for (const id of ["a", "b", "c"]) {
      admission.checkRoom();
      admission.add(run(id), false);
    }
    expect(started.map((r) => r.id)).toEqual(["a", "b"]);
    expect(admission.counts()).toEqual({ running: 2, queued: 1, waiting: 0 });
    const full = (() => {
      try {
        admission.checkRoom();
      } catch (err) {
        return err;
      }
    })();
    expect(full).toBeInstanceOf(QueueFullError);
    expect(full).toMatchObject({ limit: 3, retryAfterSeconds: 30 });
  });

  it("counts a run being written against the capacity until its place is freed", () => {
    const { admission } = admissionWith({ maxConcurrent: 1, maxQueued: 0 });
    const freePlace = admission.holdPlace();
    expect(() => admission.checkRoom()).toThrow(QueueFullError);
    freePlace();
    expect(() => admission.checkRoom()).not.toThrow();
  });

  it("hands a freed slot to the queued runs in the order they came", () => {
    const { admission, started, left } = admissionWith({ maxConcurrent: 1 });
    const [a, b, c] = [run("a"), run("b"), run("c")];
    for (const r of [a, b, c]) admission.add(r, false);
    expect(started).toEqual([a]);
    admission.finished(a);
    expect(started).toEqual([a, b]);
    expect(left).toEqual([a]);
    admission.finished(b);
    expect(started).toEqual([a, b, c]);
    expect(admission.counts()).toEqual({ running: 1, queued: 0, waiting: 0 });
  });

  it("hands a freed slot to the key running the fewest runs, its run queued first; ties go to the run queued first", () => {
    const { admission, started } = admissionWith({ maxConcurrent: 2 });
    const [a1, a2, a3, a4] = ["a1", "a2", "a3", "a4"].map((id) => run(id, `s-${id}`, "A"));
    // Runs without a key share one key's turn.
    const [keyless, b1] = [run("n1"), run("b1", "s-b1", "B")];
    for (const r of [a1, a2, a3, a4, keyless, b1]) if (r) admission.add(r, false);
    expect(started).toEqual([a1, a2]);
    const next = (ended: Run | undefined) => {
      if (ended) admission.finished(ended);
      return started.at(-1);
    };
    // A runs one; the keyless runs and B none: of those, the run queued first.
    expect(next(a1)).toBe(keyless);
    // A still runs one: B's run goes before A's older ones.
    expect(next(keyless)).toBe(b1);
    // B runs one, A none.
    expect(next(a2)).toBe(a3);
    expect(next(b1)).toBe(a4);
    expect(admission.counts()).toEqual({ running: 2, queued: 0, waiting: 0 });
  });

  it("gives a busy session to the runs waiting for it one at a time, oldest first", async () => {
    const { admission, started, promoted, failures, nextStart } = admissionWith({
      maxConcurrent: 4,
    });
    const [a, b, c] = [run("a", "s"), run("b", "s"), run("c", "s")];
    admission.add(a, false);
    for (const r of [b, c]) admission.add(r, admission.mustWait("s", a.id, true));
    expect(started).toEqual([a]);
    expect(admission.counts()).toEqual({ running: 1, queued: 0, waiting: 2 });
    expect(admission.waitingFor("s")).toEqual([b, c]);

    let next = nextStart();
    admission.finished(a);
    expect(await next).toBe(b);
    expect(promoted).toEqual([b]);
    expect(admission.waitingFor("s")).toEqual([c]);

    next = nextStart();
    admission.finished(b);
    expect(await next).toBe(c);
    expect(started).toEqual([a, b, c]);
    expect(admission.isActive("s")).toBe(true);
    admission.finished(c);
    expect(admission.isActive("s")).toBe(false);
    expect(failures).toEqual([]);
  });

  it("does not let a newcomer overtake a run waiting for the session, even once the session is free", () => {
    const { admission } = admissionWith();
    // Another process's run holds the session: this one waits for it.
    const waiting = run("waiting", "s");
    admission.add(waiting, admission.mustWait("s", "elsewhere", true));
    // That run has ended (the store shows none active), but the waiting run has not had its turn.
    const busy = (() => {
      try {
        admission.mustWait("s", null, false);
      } catch (err) {
        return err;
      }
    })();
    expect(busy).toBeInstanceOf(SessionBusyError);
    expect(busy).toMatchObject({ activeRunId: "waiting" });
    expect(admission.mustWait("s", null, true)).toBe(true);
    // Another session is not held up.
    expect(admission.mustWait("t", null, false)).toBe(false);
  });

  it("admits one session's tasks one after the other, a failed one included, and none to a session being deleted", async () => {
    const { admission } = admissionWith();
    const order: string[] = [];
    let openFirst = () => {};
    const gate = new Promise<void>((resolve) => {
      openFirst = resolve;
    });
    const first = admission.inAdmissionOrder("s", async () => {
      await gate;
      order.push("first");
      throw new Error("refused");
    });
    const second = admission.whileDeleting("s", async () => {
      order.push("deleting");
      expect(() => admission.checkOpen("s")).toThrow(SessionGoneError);
      expect(() => admission.checkOpen("t")).not.toThrow();
    });
    const third = admission.inAdmissionOrder("s", async () => {
      order.push("third");
      admission.checkOpen("s");
    });
    openFirst();
    await expect(first).rejects.toThrow("refused");
    await second;
    await third;
    expect(order).toEqual(["first", "deleting", "third"]);
  });

  it("tells a read of a session still good only while no task was asked for since it began, and none was under way as it began", async () => {
    const { admission } = admissionWith();
    const quiet = admission.readMark("s");
    expect(quiet).toBeDefined();
    expect(admission.quietSince("s", quiet)).toBe(true);

    // A task under way on the session as a read begins: the read may miss what it does.
    let open = () => {};
    const held = admission.inAdmissionOrder(
      "s",
      () =>
        new Promise<void>((resolve) => {
          open = resolve;
        }),
    );
    expect(admission.readMark("s")).toBeUndefined();
    expect(admission.quietSince("s", undefined)).toBe(false);
    // Asked for since the mark, on any session: the mark no longer holds.
    expect(admission.quietSince("s", quiet)).toBe(false);
    const other = admission.readMark("t");
    expect(admission.quietSince("t", other)).toBe(true);
    await admission.inAdmissionOrder("t", async () => {});
    expect(admission.quietSince("t", other)).toBe(false);

    open();
    await held;
    await admission.inAdmissionOrder("s", async () => {});
    // Once the session's tasks are settled and gone, a new mark holds again.
    await new Promise<void>((resolve) => setImmediate(resolve));
    const later = admission.readMark("s");
    expect(later).toBeDefined();
    expect(admission.quietSince("s", later)).toBe(true);
  });

  it("on shutdown takes no more runs and hands back the queued, then the waiting ones; running ones stay", () => {
    const { admission, started, left } = admissionWith({ maxConcurrent: 1 });
    const [a, queued, waiting] = [run("a", "s"), run("q"), run("w", "s")];
    admission.add(a, false);
    admission.add(queued, false);
    admission.add(waiting, admission.mustWait("s", a.id, true));

    expect(admission.close()).toEqual({ queued: [queued], waiting: [waiting] });
    expect(() => admission.checkOpen("x")).toThrow(ShuttingDownError);
    expect(admission.counts()).toEqual({ running: 1, queued: 0, waiting: 0 });
    for (const r of [queued, waiting]) admission.remove(r);
    expect(admission.all()).toEqual([a]);

    admission.finished(a);
    expect(started).toEqual([a]);
    expect(left).toEqual([queued, waiting, a]);
    expect(admission.all()).toEqual([]);
  });

  it("a cancelled queued run leaves the queue at once and frees its session for the run waiting for it", async () => {
    const { admission, started, nextStart } = admissionWith({ maxConcurrent: 1 });
    const [a, queued, waiting] = [run("a"), run("q", "s"), run("w", "s")];
    admission.add(a, false);
    admission.add(queued, false);
    admission.add(waiting, admission.mustWait("s", queued.id, true));
    expect(admission.withdraw(queued)).toBe("queued");
    expect(admission.counts()).toEqual({ running: 1, queued: 0, waiting: 1 });
    // It still holds its session until it has ended.
    expect(admission.runsOf("s")).toEqual([queued, waiting]);
    admission.remove(queued);
    // The waiting run gets the session, and starts once the slot is free.
    const next = nextStart();
    expect(admission.withdraw(a)).toBe("running");
    admission.finished(a);
    expect(await next).toBe(waiting);
    expect(started).toEqual([a, waiting]);
  });
});
