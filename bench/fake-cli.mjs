// The held side of the bench's fake CLI (fake-cli.sh hands `!hold` over here). Lines are shaped
// like the real CLI's stream-json (see test/support/stream-json-lines.ts).
//   hold             one delta, then nothing until stdin closes or a signal ends the process:
//                    an active run that costs the bridge only its bookkeeping.
//   api N FILE       as the CLI starts a turn: its API check (`HEAD /api/hello`), then a Messages
//                    API call, streamed, on the same kept-alive connection, to ANTHROPIC_BASE_URL
//                    with the credential of its environment (user message: N, which the bench's
//                    upstream answers with N deltas); each SSE event relayed as a stream_event line
//                    as it comes, then the answer whole and a result. Writes to FILE when the
//                    call left and when its answer's first byte came (ms since the epoch), and the
//                    base URL it called.
import { writeFileSync, writeSync } from "node:fs";
import { Agent, request } from "node:http";

const SESSION_ID = "11111111-2222-3333-4444-555555555555";
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
} else if (mode === "api") {
  const [deltas, statsFile] = args;
  callApi(deltas, statsFile);
} else {
  process.stderr.write(`fake-cli.mjs: unknown mode ${mode}\n`);
  process.exit(2);
}

function fail(message) {
  process.stderr.write(`fake-cli.mjs: ${message}\n`);
  process.exit(1);
}

function callApi(deltas, statsFile) {
  const baseUrl = (process.env.ANTHROPIC_BASE_URL ?? "").replace(/\/+$/, "");
  const key = process.env.ANTHROPIC_API_KEY;
  const token = process.env.ANTHROPIC_AUTH_TOKEN;
  const agent = new Agent({ keepAlive: true });
  write(init());
  const check = request(`${baseUrl}/api/hello`, { method: "HEAD", agent });
  check.on("error", (err) => fail(err.message));
  check.on("response", (res) => {
    if (res.statusCode !== 200) fail(`the API check answered ${res.statusCode}`);
    res.resume();
    res.on("end", () => callMessages(deltas, statsFile, { baseUrl, key, token, agent }));
  });
  check.end();
}

function callMessages(deltas, statsFile, { baseUrl, key, token, agent }) {
  const wallNow = () => performance.timeOrigin + performance.now();
  const sentAt = wallNow();
  let firstByteAt;
  const req = request(`${baseUrl}/v1/messages`, {
    agent,
    method: "POST",
    headers: {
      "content-type": "application/json",
      "anthropic-version": "2023-06-01",
      ...(key ? { "x-api-key": key } : {}),
      ...(token ? { authorization: `Bearer ${token}` } : {}),
    },
  });
  req.on("error", (err) => fail(err.message));
  req.on("response", (res) => {
    if (res.statusCode !== 200) fail(`the API answered ${res.statusCode}`);
    res.setEncoding("utf8");
    let tail = "";
    let id = "";
    const text = [];
    res.on("data", (chunk) => {
      firstByteAt ??= wallNow();
      const events = (tail + chunk).split("\n\n");
      tail = events.pop() ?? "";
      let out = "";
      for (const block of events) {
        const data = block.slice(block.indexOf("data: ") + 6);
        const event = JSON.parse(data);
        if (event.type === "message_start") id = event.message.id;
        if (event.delta?.type === "text_delta") text.push(event.delta.text);
        out += streamEvent(id, event);
      }
      write(out);
    });
    res.on("end", () => {
      writeFileSync(statsFile, JSON.stringify({ baseUrl, sentAt, firstByteAt }));
      write(
        line({
          type: "assistant",
          message: {
            id,
            type: "message",
            role: "assistant",
            model: "claude-bench",
            content: [{ type: "text", text: text.join("") }],
            usage: { input_tokens: 100, output_tokens: Number(deltas) },
          },
          parent_tool_use_id: null,
          session_id: SESSION_ID,
          uuid: `a-${id}`,
        }) +
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
            usage: { input_tokens: 100, output_tokens: Number(deltas) },
            uuid: "result-uuid",
          }),
      );
      agent.destroy();
    });
  });
  req.end(
    JSON.stringify({
      model: "claude-bench",
      max_tokens: 32_000,
      stream: true,
      messages: [{ role: "user", content: deltas }],
    }),
  );
}
