import type { FakeScenario, FakeStep } from "./fake-claude.js";
import {
  assistant,
  messageStart,
  result,
  streamEvent,
  systemInit,
  textDelta,
} from "./stream-json-lines.js";

// Scenarios for the fake CLI that the run and HTTP tests share.

/**
 * A reply streamed as `parts`, `delayMs` apart, then a successful result with the given usage;
 * `uuid` is its message's (the run's last_message_uuid).
 */
export function streamedReply(
  parts: string[],
  opts: {
    delayMs?: number;
    usage?: { input: number; output: number };
    costUsd?: number;
    uuid?: string;
  } = {},
): FakeScenario {
  const text = parts.join("");
  const usage = opts.usage ?? { input: 100, output: 20 };
  const steps: FakeStep[] = [
    { emit: systemInit() },
    { emit: messageStart("msg_1") },
    {
      emit: streamEvent("msg_1", {
        type: "content_block_start",
        index: 0,
        content_block: { type: "text", text: "" },
      }),
    },
  ];
  for (const part of parts) {
    if (opts.delayMs) steps.push({ sleep: opts.delayMs });
    steps.push({ emit: textDelta("msg_1", 0, part) });
  }
  steps.push(
    {
      emit: assistant("msg_1", [{ type: "text", text }], {
        uuid: opts.uuid ?? "assistant-uuid-1",
      }),
    },
    {
      emit: result({
        result: text,
        total_cost_usd: opts.costUsd ?? 0.01,
        usage: {
          input_tokens: usage.input,
          output_tokens: usage.output,
          cache_read_input_tokens: 3,
          cache_creation_input_tokens: 2,
        },
      }),
    },
  );
  return { steps };
}

/** Starts, says one thing, then works (sleeps) for `seconds` before it would answer. */
export function longRun(seconds: number): FakeScenario {
  return {
    steps: [
      { emit: systemInit() },
      { emit: messageStart("msg_1") },
      { emit: textDelta("msg_1", 0, "Working on it") },
      { sleep: seconds * 1000 },
      { emit: result({ result: "Working on it" }) },
    ],
  };
}
