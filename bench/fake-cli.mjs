// The held side of the bench's fake CLI (fake-cli.sh hands `!hold` over here). Lines are shaped
// like the real CLI's stream-json (see test/support/stream-json-lines.ts).
//   hold             one delta, then nothing until stdin closes or a signal ends the process:
//                    an active run that costs the bridge only its bookkeeping.
import { writeSync } from "node:fs";

const SESSION_ID = "11111111-2222-3333-4444-555555555555";
const [mode] = process.argv.slice(2);

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

if (mode === "hold") {
  write(init() + messageStart("msg_0") + blockStart("msg_0") + delta("msg_0", "holding"));
  process.stdin.on("end", () => process.exit(0));
  process.stdin.resume();
} else {
  process.stderr.write(`fake-cli.mjs: unknown mode ${mode}\n`);
  process.exit(2);
}
