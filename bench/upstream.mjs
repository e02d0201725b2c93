// The bench's stand-in for the Messages API, in a process of its own so that its work is neither
// the server's nor the bench client's. `POST /v1/messages` streams an answer of N text deltas, N
// being the user message's text, as fast as the connection takes it: the answer is made once per
// N and written whole, its first delta in a write of its own (the first byte leaves at once).
// `HEAD /api/hello` answers as the API's own check does. `GET /stats` says how many Messages calls
// came with which credential, so the bench can check which went through the gateway (which adds
// the operator's) and which did not. Prints its port.
import { createServer } from "node:http";

const answers = new Map();
const credentials = {};

const event = (type, data) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;

/** The answer's head up to its first delta, and the rest. */
function answer(deltas) {
  let made = answers.get(deltas);
  if (made) return made;
  const delta = (i) =>
    event("content_block_delta", { index: 0, delta: { type: "text_delta", text: `${i} ` } });
  const head =
    event("message_start", {
      message: {
        id: `msg_bench_${deltas}`,
        type: "message",
        role: "assistant",
        model: "claude-bench",
        content: [],
        stop_reason: null,
        usage: { input_tokens: 100, output_tokens: 1 },
      },
    }) +
    event("content_block_start", { index: 0, content_block: { type: "text", text: "" } }) +
    delta(0);
  const rest = [];
  for (let i = 1; i < deltas; i++) rest.push(delta(i));
  rest.push(
    event("content_block_stop", { index: 0 }),
    event("message_delta", {
      delta: { stop_reason: "end_turn", stop_sequence: null },
      usage: { output_tokens: deltas },
    }),
    event("message_stop", {}),
  );
  made = { head: Buffer.from(head), rest: Buffer.from(rest.join("")) };
  answers.set(deltas, made);
  return made;
}

const server = createServer((req, res) => {
  if (req.method === "GET" && req.url === "/stats") {
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(credentials));
    return;
  }
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const path = req.url?.split("?")[0];
    if (req.method === "HEAD" && path === "/api/hello") {
      res.writeHead(200).end();
      return;
    }
    if (req.method !== "POST" || path !== "/v1/messages") {
      res.writeHead(404).end();
      return;
    }
    const credential = req.headers["x-api-key"] ?? req.headers.authorization ?? "none";
    credentials[credential] = (credentials[credential] ?? 0) + 1;
    const body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    const { head, rest } = answer(Number(body.messages[0].content));
    res.writeHead(200, {
      "content-type": "text/event-stream",
      "cache-control": "no-cache",
      "request-id": `req_bench_${Date.now()}`,
    });
    res.write(head);
    setImmediate(() => res.end(rest));
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, "127.0.0.1", () => process.stdout.write(`listening ${server.address().port}\n`));
