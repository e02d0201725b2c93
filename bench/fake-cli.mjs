// The generated side of the bench's fake CLI (fake-cli.sh hands over here for `!` orders).
// Lines are shaped like the real CLI's stream-json (see test/support/stream-json-lines.ts).
//   stamped N RATE   N text deltas, each stamped with its write time (ms since the epoch, as
//                    performance.timeOrigin + performance.now()); RATE lines per second, 0 = as
//                    fast as the pipe takes them. Then the whole block and a result.
//   hold             one delta, then nothing until stdin closes or a signal ends the process:
//                    an active run that costs the bridge only its bookkeeping.
import { writeSync } from "node:fs";

const SESSION_ID = "11111111-2222-3333-4444-555555555555";
const PER_MESSAGE = 500;
const [mode, ...args] = process.argv.slice(2);

/** Blocking write of the whole text: the write time is when the pipe took it. */
function write(text) {
  const bytes = Buffer.from(text);
  let off = 0;
  while (off < bytes.length) {
    try {
      off += writeSync(1, bytes, off);
    } catch (err) {
      if (err.code !== "EAGAIN") throw err;
    }
  }
}

const line = (value) => `${JSON.stringify(value)}\n`;
const now = () => performance.timeOrigin + performance.now();
const streamEvent = (messageId, event) =>
  line({
    type: "stream_event",
    event,
    session_id: SESSION_ID,
    parent_tool_use_id: null,
    uuid: `se-${Math.random().toString(16).slice(2)}`,
    api_message_id: messageId,
  });
const init = () =>
  line({ type: "system", subtype: "init", session_id: SESSION_ID, model: "claude-bench" });
const messageStart = (id) =>
  streamEvent(id, {
    type: "message_start",
    message: {
      id,
      type: "message",
      role: "assistant",
      model: "claude-bench",
      content: [],
      usage: { input_tokens: 100 },
    },
  });
const blockStart = (id) =>
  streamEvent(id, {
    type: "content_block_start",
    index: 0,
    content_block: { type: "text", text: "" },
  });
const delta = (id, text) =>
  streamEvent(id, { type: "content_block_delta", index: 0, delta: { type: "text_delta", text } });
const whole = (id, text) =>
  line({
    type: "assistant",
    message: {
      id,
      type: "message",
      role: "assistant",
      model: "claude-bench",
      content: [{ type: "text", text }],
      usage: { input_tokens: 100, output_tokens: 1 },
    },
    parent_tool_use_id: null,
    session_id: SESSION_ID,
    uuid: `a-${id}`,
  });
const result = () =>
  line({
    type: "result",
    subtype: "success",
    is_error: false,
    duration_ms: 1,
    duration_api_ms: 1,
    num_turns: 1,
    result: "Done.",
    session_id: SESSION_ID,
    total_cost_usd: 0,
    usage: {
      input_tokens: 100,
      output_tokens: 1,
      cache_read_input_tokens: 0,
      cache_creation_input_tokens: 0,
    },
    modelUsage: { "claude-bench": { contextWindow: 200000 } },
    uuid: "result-uuid",
  });

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function stamped(count, rate) {
  write(init());
  const started = performance.now();
  let text = "";
  let messageId = "";
  for (let i = 0; i < count; i++) {
    if (i % PER_MESSAGE === 0) {
      messageId = `msg_${i / PER_MESSAGE}`;
      write(messageStart(messageId) + blockStart(messageId));
    }
    if (rate > 0) {
      const due = started + (i * 1000) / rate;
      const wait = due - performance.now();
      if (wait > 1) await sleep(wait);
    }
    const piece = `${i}@${now().toFixed(3)};`;
    text += piece;
    write(delta(messageId, piece));
    if ((i + 1) % PER_MESSAGE === 0 || i === count - 1) {
      write(
        whole(messageId, text) + streamEvent(messageId, { type: "content_block_stop", index: 0 }),
      );
      text = "";
    }
  }
  write(result());
}

if (mode === "stamped") {
  await stamped(Number(args[0] ?? 1000), Number(args[1] ?? 0));
} else if (mode === "hold") {
  write(init() + messageStart("msg_0") + blockStart("msg_0") + delta("msg_0", "holding"));
  process.stdin.on("end", () => process.exit(0));
  process.stdin.resume();
} else {
  process.stderr.write(`fake-cli.mjs: unknown mode ${mode}\n`);
  process.exit(2);
}
