import { describe, expect, it } from "vitest";
import { preferredWhenBusy, whenBusy } from "../../src/http/routes/runs/when-busy.js";

// What a message asks for when its session is busy: the body's `when_busy`, else the
// `when-busy` preference of `Prefer` (RFC 7240 syntax), else reject.

describe("when a session is busy", () => {
  it("reads the when-busy preference among others, case-insensitively, quoted or not, with parameters", () => {
    expect(preferredWhenBusy("when-busy=queue")).toBe("queue");
    expect(preferredWhenBusy("respond-async, When-Busy=QUEUE")).toBe("queue");
    expect(preferredWhenBusy('respond-async,when-busy="queue";x=1')).toBe("queue");
    expect(preferredWhenBusy("when-busy=reject")).toBe("reject");
  });

  it("ignores what it does not know: no preference, another value, a bare name", () => {
    expect(preferredWhenBusy(undefined)).toBeUndefined();
    expect(preferredWhenBusy("respond-async")).toBeUndefined();
    expect(preferredWhenBusy("when-busy=later")).toBeUndefined();
    expect(preferredWhenBusy("when-busy")).toBeUndefined();
    expect(preferredWhenBusy("wait=10")).toBeUndefined();
  });

  it("lets the body win over the header, and names the preference applied only when the header decided", () => {
    expect(whenBusy("reject", "when-busy=queue")).toEqual({ queue: false, applied: null });
    expect(whenBusy("queue", undefined)).toEqual({ queue: true, applied: null });
    expect(whenBusy(undefined, "respond-async, when-busy=queue")).toEqual({
      queue: true,
      applied: "when-busy=queue",
    });
    expect(whenBusy(undefined, "respond-async")).toEqual({ queue: false, applied: null });
  });
});
