import { describe, expect, it } from "vitest";
import {
  type RunEvent,
  RunLifecycle,
  type RunState,
  RunStateError,
  TRANSITIONS,
} from "../../src/runs/run-state.js";

// The run's state machine alone: its table, what each transition decides, and the refusals.

function lifecycle(initial: "waiting" | "queued" = "queued") {
  const interrupted: string[] = [];
  const life = new RunLifecycle(initial, { interrupted: (reason) => interrupted.push(reason) });
  return { life, interrupted };
}

function fireAll(life: RunLifecycle, events: RunEvent[]): RunState[] {
  return events.map((event) => life.fire(event));
}

describe("a run's lifecycle", () => {
  it("goes from waiting to finished through every state of a run that ran and asked for approval", async () => {
    const { life } = lifecycle("waiting");
    const states = fireAll(life, [
      { type: "promote" },
      { type: "start" },
      { type: "launch" },
      { type: "approval_asked" },
      { type: "approval_settled" },
      { type: "outcome", status: "succeeded" },
      { type: "leave" },
    ]);
    expect(states).toEqual([
      "queued",
      "starting",
      "running",
      "awaiting_approval",
      "running",
      "ending",
      "finished",
    ]);
    expect(life.outcome).toBe("succeeded");
    expect(life.stop).toBeUndefined();
    await life.left;
  });

  it("ends a run that never started at once, with the status and reason of what ended it", () => {
    const cases: ["waiting" | "queued", RunEvent, string, string][] = [
      ["waiting", { type: "cancel" }, "cancelled", "cancelled while it waited for its session"],
      ["queued", { type: "interrupt" }, "cancelled", "cancelled before it started"],
      [
        "queued",
        { type: "shutdown" },
        "interrupted",
        "the server shut down before the run started",
      ],
      ["queued", { type: "strand", reason: "host gone" }, "interrupted", "host gone"],
    ];
    for (const [initial, event, status, reason] of cases) {
      const { life } = lifecycle(initial);
      expect(life.fire(event)).toBe("ending");
      expect(life.endedUnstarted).toBe(true);
      expect(life.outcome).toBe(status);
      expect(life.stop).toEqual({ status, reason });
    }
  });

  it("stops a started run: a client's cancel decides `cancelled`, the bridge's interruption wins over it", () => {
    const { life, interrupted } = lifecycle();
    fireAll(life, [{ type: "start" }, { type: "launch" }]);
    expect(life.fire({ type: "cancel" })).toBe("stopping");
    expect(life.stop).toEqual({ status: "cancelled", reason: "cancelled by a client" });
    expect(interrupted).toEqual([]);
    expect(life.fire({ type: "shutdown" })).toBe("stopping");
    expect(interrupted).toEqual(["the server shut down before the run finished"]);
    expect(life.stop).toEqual({
      status: "interrupted",
      reason: "the server shut down before the run finished",
    });
    // The agent's own status does not undo the client's cancel.
    life.fire({ type: "outcome", status: "succeeded" });
    expect(life.outcome).toBe("cancelled");
    expect(life.endedUnstarted).toBe(false);
  });

  it("interrupts a run not started yet when the lease is lost, which then starts stopped", () => {
    const { life, interrupted } = lifecycle();
    expect(life.fire({ type: "lease_lost" })).toBe("queued");
    expect(interrupted).toEqual(["this instance lost its lease; another instance closed the run"]);
    expect(fireAll(life, [{ type: "start" }, { type: "launch" }])).toEqual(["starting", "running"]);
    life.fire({ type: "outcome", status: "cancelled" });
    expect(life.stop?.status).toBe("interrupted");
  });

  it("refuses, in one place, what a state does not take: a stop once the outcome is known, a start twice", () => {
    const { life } = lifecycle();
    fireAll(life, [{ type: "start" }, { type: "outcome", status: "failed" }]);
    for (const type of ["cancel", "interrupt", "shutdown", "lease_lost", "start"] as const) {
      expect(life.accepts(type)).toBe(false);
      expect(() => life.fire({ type } as RunEvent)).toThrow(RunStateError);
    }
    expect(life.state).toBe("ending");

    const { life: started } = lifecycle();
    started.fire({ type: "start" });
    expect(() => started.fire({ type: "start" })).toThrow(
      "a run that is starting does not take the event start",
    );
    expect(() => started.fire({ type: "hand_over" })).toThrow(RunStateError);
  });

  it("keeps a run starting while its agent asks for approval before the bridge saw it launch", () => {
    const { life } = lifecycle();
    life.fire({ type: "start" });
    expect(fireAll(life, [{ type: "approval_asked" }, { type: "launch" }])).toEqual([
      "starting",
      "running",
    ]);
    expect(life.fire({ type: "approval_asked" })).toBe("awaiting_approval");
    expect(life.fire({ type: "cancel" })).toBe("stopping");
    expect(
      fireAll(life, [{ type: "approval_settled" }, { type: "outcome", status: "cancelled" }]),
    ).toEqual(["stopping", "ending"]);
  });

  it("hands a queued run over, after which it only leaves", async () => {
    const { life } = lifecycle();
    expect(life.fire({ type: "hand_over" })).toBe("handed_over");
    for (const type of ["start", "cancel", "shutdown", "promote"] as const) {
      expect(life.accepts(type)).toBe(false);
    }
    expect(life.fire({ type: "leave" })).toBe("handed_over");
    await life.left;
  });

  it("lets no state but the ends resolve the run's leaving, and every terminal state take nothing but `leave`", () => {
    for (const [state, steps] of Object.entries(TRANSITIONS)) {
      const leaves = steps.leave !== undefined;
      expect(leaves, state).toBe(["ending", "finished", "handed_over"].includes(state));
      if (state === "finished" || state === "handed_over") {
        expect(Object.keys(steps), state).toEqual(["leave"]);
      }
    }
  });
});
