import type { FakeScenario } from "./fake-cli.js";
import type { AgentUsage } from "./fake-dialects.js";

// Scenarios for the fake CLI that the run and HTTP tests share, in agent steps: each plays in the
// dialect of the fake it is given to (claude's or codex's).

/**
 * A reply streamed as `parts`, `delayMs` apart, then a successful result with the given usage;
 * `uuid` is its message's (the run's last_message_uuid; claude only).
 */
export function streamedReply(
  parts: string[],
  opts: { delayMs?: number; usage?: AgentUsage; costUsd?: number; uuid?: string } = {},
): FakeScenario {
  const { delayMs, ...end } = opts;
  return {
    steps: [
      { init: true },
      { reply: { parts, ...(delayMs ? { delayMs } : {}) } },
      { succeed: end },
    ],
  };
}

/**
 * Starts and marks `working`, then holds until the file `go` exists (a test makes it once it has
 * seen what it waits for), then replies as streamedReply does.
 */
export function heldReply(
  go: string,
  parts: string[],
  end: { usage?: AgentUsage; costUsd?: number } = {},
): FakeScenario {
  return {
    steps: [
      { init: true },
      { mark: "working" },
      { waitFile: go },
      { reply: { parts } },
      { succeed: end },
    ],
  };
}

/** Starts, says one thing, then works (sleeps) for `seconds` before it would answer. */
export function longRun(seconds: number): FakeScenario {
  return {
    steps: [
      { init: true },
      { reply: { parts: ["Working on it"] } },
      { sleep: seconds * 1000 },
      { succeed: {} },
    ],
  };
}
