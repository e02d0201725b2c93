import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

// A loopback stand-in for the Anthropic Messages API that the real `claude` binary talks to
// (ANTHROPIC_BASE_URL=mock.url). Main-conversation requests consume scripted turns in order and
// are answered with real Messages API SSE; side requests (anything without tools, e.g. a title
// or a quota probe) and unknown endpoints are answered with something harmless and never consume
// a turn. Every request is recorded so a test can check what the model saw.
//
// Observed with claude 2.1.328 (HOME fresh, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1): the CLI
// only ever calls POST /v1/messages with stream: true, and every call carries the tool list; no
// side request (title, quota probe, count_tokens) and no other endpoint was seen. The CLI retries
// errors (a 400 six times at once, 429/5xx/401 with backoff), hence sticky error turns below.

export type MockBlock =
  | { type: "text"; text: string }
  | { type: "thinking"; thinking: string; signature?: string }
  | { type: "tool_use"; name: string; input: Record<string, unknown>; id?: string };

export interface MockUsage {
  input_tokens: number;
  output_tokens: number;
  cache_read_input_tokens: number;
  cache_creation_input_tokens: number;
}

export type MockTurn =
  | {
      blocks: MockBlock[];
      usage?: Partial<MockUsage>;
      /** Defaults to "tool_use" when a block is a tool_use, else "end_turn". */
      stopReason?: "end_turn" | "tool_use" | "max_tokens";
      /** Extra response headers (e.g. anthropic-ratelimit-unified-*). */
      headers?: Record<string, string>;
      /** Milliseconds to wait between SSE events (default 2). */
      delayMs?: number;
      /** Called when the request arrives; the answer waits until what it returns settles. */
      hold?: () => Promise<unknown>;
      /**
       * Streamed answers: called once the first text delta is sent; the rest of the stream waits
       * until what it returns settles.
       */
      holdMidStream?: () => Promise<unknown>;
      /** Streamed answers: the connection is cut right after the first text delta. */
      cutMidStream?: boolean;
    }
  | {
      error: { status: number; type: string; message: string };
      /** Extra response headers (e.g. retry-after, x-should-retry). */
      headers?: Record<string, string>;
      /**
       * The CLI retries a failed request several times (a 400 six times, dropping beta headers
       * one by one). By default the error sticks: every retry of the same conversation (same
       * `messages`) gets it too, without consuming more turns. `once: true` fails one request only.
       */
      once?: boolean;
    };

export type RequestKind = "main" | "side" | "count_tokens" | "other";

export interface RecordedRequest {
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  /** Parsed JSON body, or the raw text when it is not JSON (undefined when empty). */
  body: unknown;
  kind: RequestKind;
  /** The response the mock gave: the scripted turn, "default", or a note. */
  answeredWith: string;
}

/** The body of a recorded POST /v1/messages, loosely typed for assertions. */
export interface MessagesBody {
  model: string;
  max_tokens: number;
  stream?: boolean;
  system?: string | Array<{ type: string; text: string }>;
  tools?: Array<{ name: string }>;
  /** The CLI (2.1.328) also sends `role: "system"` messages (the environment section). */
  messages: Array<{
    role: "user" | "assistant" | "system";
    content: string | Array<Record<string, unknown>>;
  }>;
  [k: string]: unknown;
}

export interface MockAnthropic {
  url: string;
  requests: RecordedRequest[];
  /**
   * Appends turns to the queue; each main-conversation request consumes one. A sticky error
   * (see MockTurn) ends here: the test has moved on to the next turn, e.g. a retry of the
   * conversation that failed, whose request is the same.
   */
  script(...turns: MockTurn[]): void;
  /**
   * Turns for the requests of another conversation, one whose first user message holds `text`:
   * a subagent's (its prompt), which runs beside the main conversation, so that which request
   * comes first does not decide which gets which turn.
   */
  scriptFor(text: string, ...turns: MockTurn[]): void;
  /** Turns still queued. */
  pending(): number;
  /** The main-conversation /v1/messages requests, in order, with their bodies. */
  mainRequests(): MessagesBody[];
  close(): Promise<void>;
}

export interface MockOptions {
  /** Text of the turn given when the queue is empty. */
  defaultText?: string;
  /** Override the main/side classifier. */
  isMain?: (body: MessagesBody) => boolean;
  /** No console warning for unexpected endpoints. */
  quiet?: boolean;
  /** Called for every request (e.g. console.error for observation). */
  onRequest?: (req: RecordedRequest) => void;
}

export const DEFAULT_USAGE: MockUsage = {
  input_tokens: 100,
  output_tokens: 20,
  cache_read_input_tokens: 0,
  cache_creation_input_tokens: 0,
};

/** The text of the tool results in a request's last message: what a command printed. */
export function toolResultText(body: MessagesBody | undefined): string {
  const content = body?.messages.at(-1)?.content;
  if (!Array.isArray(content)) return "";
  const texts: string[] = [];
  for (const block of content) {
    if (block.type !== "tool_result") continue;
    const inner = block.content;
    if (typeof inner === "string") texts.push(inner);
    else if (Array.isArray(inner))
      for (const part of inner as Array<{ text?: unknown }>)
        if (typeof part.text === "string") texts.push(part.text);
  }
  return texts.join("\n");
}

/** Main conversation requests carry the tool list; side requests (titles, probes) carry none. */
export function isMainRequest(body: MessagesBody): boolean {
  return Array.isArray(body.tools) && body.tools.length > 0;
}

// With `--json-schema` (Claude Code 2.1.328) the CLI offers the model a `StructuredOutput` tool
// whose input schema is the schema. A valid call ends the turn at once: no further request, and the
// `result` line carries the input as `structured_output` (its `result` the input as JSON text). An
// invalid call gets an error tool result, and the model answers again. A turn without the call
// gets a synthetic user message (`[structured-output-enforce] …`, `isSynthetic: true`) and one more
// request; the CLI then ends `success` without `structured_output` whatever that one answers.

/** The turn of a model that answers `input` through the StructuredOutput tool, after `text`. */
export function structuredOutputTurn(input: Record<string, unknown>, text?: string): MockTurn {
  return {
    blocks: [
      ...(text === undefined ? [] : [{ type: "text" as const, text }]),
      { type: "tool_use", name: "StructuredOutput", input },
    ],
  };
}

/** The turns of a model that never calls StructuredOutput: its answer, and its answer to the enforce message. */
export function noStructuredOutputTurns(text: string): MockTurn[] {
  return [
    { blocks: [{ type: "text", text }] },
    { blocks: [{ type: "text", text: `${text} (again)` }] },
  ];
}

/** Splits text in about `parts` chunks (at least 1 char each), for several deltas. */
export function chunk(text: string, parts = 4): string[] {
  if (text.length === 0) return [""];
  const size = Math.max(1, Math.ceil(text.length / parts));
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

export interface Hold {
  /** For a turn's `hold`. */
  hold: () => Promise<void>;
  /** Settles when the held request has arrived. */
  arrived: Promise<void>;
  release(): void;
}

/** A hold for a turn: its request is answered only after `release()`. */
export function holdUntilReleased(): Hold {
  let arrive = () => {};
  let release = () => {};
  const arrived = new Promise<void>((resolve) => (arrive = resolve));
  const released = new Promise<void>((resolve) => (release = resolve));
  return {
    hold: () => {
      arrive();
      return released;
    },
    arrived,
    release,
  };
}

function id(prefix: string): string {
  return `${prefix}_mock${randomBytes(9).toString("hex")}`;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    req.on("data", (c: Buffer) => parts.push(c));
    req.on("end", () => resolve(Buffer.concat(parts).toString("utf8")));
    req.on("error", reject);
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function sendJson(res: ServerResponse, status: number, body: unknown, headers = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    "content-type": "application/json",
    "request-id": id("req"),
    ...headers,
  });
  res.end(text);
}

function messageJson(model: string, blocks: MockBlock[], usage: MockUsage, stopReason: string) {
  return {
    id: id("msg"),
    type: "message",
    role: "assistant",
    model,
    content: blocks.map((b) =>
      b.type === "text"
        ? { type: "text", text: b.text }
        : b.type === "thinking"
          ? { type: "thinking", thinking: b.thinking, signature: b.signature ?? "c2ln" }
          : { type: "tool_use", id: b.id ?? id("toolu"), name: b.name, input: b.input },
    ),
    stop_reason: stopReason,
    stop_sequence: null,
    usage,
  };
}

async function streamTurn(
  res: ServerResponse,
  model: string,
  turn: Extract<MockTurn, { blocks: MockBlock[] }>,
): Promise<void> {
  const usage: MockUsage = { ...DEFAULT_USAGE, ...turn.usage };
  const hasTool = turn.blocks.some((b) => b.type === "tool_use");
  const stopReason = turn.stopReason ?? (hasTool ? "tool_use" : "end_turn");
  const delay = turn.delayMs ?? 2;
  res.writeHead(200, {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    connection: "keep-alive",
    "request-id": id("req"),
    ...turn.headers,
  });
  const send = async (event: string, data: Record<string, unknown>) => {
    res.write(`event: ${event}\ndata: ${JSON.stringify({ type: event, ...data })}\n\n`);
    if (delay > 0) await sleep(delay);
  };
  await send("message_start", {
    message: {
      id: id("msg"),
      type: "message",
      role: "assistant",
      model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: {
        input_tokens: usage.input_tokens,
        cache_creation_input_tokens: usage.cache_creation_input_tokens,
        cache_read_input_tokens: usage.cache_read_input_tokens,
        output_tokens: 1,
      },
    },
  });
  await send("ping", {});
  let textSent = 0;
  for (const [index, b] of turn.blocks.entries()) {
    if (b.type === "text") {
      await send("content_block_start", { index, content_block: { type: "text", text: "" } });
      for (const t of chunk(b.text)) {
        await send("content_block_delta", { index, delta: { type: "text_delta", text: t } });
        if (textSent++ > 0) continue;
        if (turn.cutMidStream) {
          res.destroy();
          return;
        }
        await turn.holdMidStream?.();
      }
    } else if (b.type === "thinking") {
      await send("content_block_start", {
        index,
        content_block: { type: "thinking", thinking: "", signature: "" },
      });
      for (const t of chunk(b.thinking)) {
        await send("content_block_delta", {
          index,
          delta: { type: "thinking_delta", thinking: t },
        });
      }
      await send("content_block_delta", {
        index,
        delta: { type: "signature_delta", signature: b.signature ?? "c2lnbmF0dXJl" },
      });
    } else {
      await send("content_block_start", {
        index,
        content_block: { type: "tool_use", id: b.id ?? id("toolu"), name: b.name, input: {} },
      });
      for (const j of chunk(JSON.stringify(b.input), 3)) {
        await send("content_block_delta", {
          index,
          delta: { type: "input_json_delta", partial_json: j },
        });
      }
    }
    await send("content_block_stop", { index });
  }
  await send("message_delta", {
    delta: { stop_reason: stopReason, stop_sequence: null },
    usage: { output_tokens: usage.output_tokens },
  });
  await send("message_stop", {});
  res.end();
}

/**
 * Identifies a conversation position across the CLI's retries, which may rewrite the system
 * parts of the request (the 400 fallback drops betas and edits the environment message):
 * the number of user/assistant messages and the last of them, without cache_control marks.
 */
export function conversationKey(body: MessagesBody): string {
  const turns = (body.messages ?? []).filter((m) => m.role === "user" || m.role === "assistant");
  const last = turns[turns.length - 1];
  return `${turns.length}:${JSON.stringify(last ?? null, (k, v) => (k === "cache_control" ? undefined : v))}`;
}

export async function startMockAnthropic(options: MockOptions = {}): Promise<MockAnthropic> {
  const queue: MockTurn[] = [];
  const routes: Array<{ text: string; turns: MockTurn[] }> = [];
  const requests: RecordedRequest[] = [];
  const isMain = options.isMain ?? isMainRequest;
  let sticky: { key: string; turn: Extract<MockTurn, { error: unknown }> } | undefined;
  const defaultText = options.defaultText ?? "OK.";

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const raw = await readBody(req);
    let body: unknown;
    if (raw.length > 0) {
      try {
        body = JSON.parse(raw);
      } catch {
        body = raw;
      }
    }
    const path = (req.url ?? "/").split("?")[0] ?? "/";
    const rec: RecordedRequest = {
      method: req.method ?? "GET",
      path,
      headers: { ...req.headers },
      body,
      kind: "other",
      answeredWith: "",
    };
    requests.push(rec);

    if (req.method === "POST" && path === "/v1/messages/count_tokens") {
      rec.kind = "count_tokens";
      rec.answeredWith = "count_tokens";
      options.onRequest?.(rec);
      sendJson(res, 200, { input_tokens: Math.max(1, Math.ceil(raw.length / 4)) });
      return;
    }

    if (req.method === "POST" && path === "/v1/messages") {
      const mb = (body ?? {}) as MessagesBody;
      const model = typeof mb.model === "string" ? mb.model : "claude-mock";
      const main = isMain(mb);
      rec.kind = main ? "main" : "side";
      const key = conversationKey(mb);
      const opening = JSON.stringify(mb.messages?.find((m) => m.role === "user")?.content ?? "");
      const route = main ? routes.find((r) => opening.includes(r.text)) : undefined;
      let turn: MockTurn | undefined;
      if (route) {
        turn = route.turns.shift();
        rec.answeredWith = turn ? `scripted for "${route.text}"` : "default";
      } else if (main && sticky?.key === key) {
        turn = sticky.turn;
        rec.answeredWith = "error (retry)";
      } else {
        sticky = undefined;
        turn = main ? queue.shift() : undefined;
        rec.answeredWith = turn ? ("error" in turn ? "error" : "scripted") : "default";
        if (turn && "error" in turn && !turn.once) sticky = { key, turn };
      }
      options.onRequest?.(rec);
      turn ??= { blocks: [{ type: "text", text: main ? defaultText : "Mock side answer" }] };
      if ("error" in turn) {
        sendJson(
          res,
          turn.error.status,
          { type: "error", error: { type: turn.error.type, message: turn.error.message } },
          turn.headers,
        );
        return;
      }
      if (turn.hold) {
        await turn.hold();
        // The CLI may have gone while the answer was held.
        if (!res.socket || res.socket.destroyed) return;
      }
      if (mb.stream) {
        await streamTurn(res, model, turn);
      } else {
        const usage = { ...DEFAULT_USAGE, ...turn.usage };
        const stop = turn.blocks.some((b) => b.type === "tool_use") ? "tool_use" : "end_turn";
        sendJson(res, 200, messageJson(model, turn.blocks, usage, turn.stopReason ?? stop));
      }
      return;
    }

    if (req.method === "GET" && path === "/v1/models") {
      rec.answeredWith = "models";
      options.onRequest?.(rec);
      sendJson(res, 200, {
        data: [
          {
            type: "model",
            id: "claude-mock",
            display_name: "Mock",
            created_at: "2026-01-01T00:00:00Z",
          },
        ],
        has_more: false,
        first_id: "claude-mock",
        last_id: "claude-mock",
      });
      return;
    }

    // Anything else: log-worthy, answered harmlessly so that the CLI neither hangs nor fails.
    rec.answeredWith = "unknown-endpoint";
    options.onRequest?.(rec);
    if (!options.quiet) console.warn(`mock-anthropic: unexpected ${rec.method} ${path}`);
    if (req.method === "HEAD") {
      res.writeHead(200);
      res.end();
      return;
    }
    sendJson(res, 200, {});
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) {
        sendJson(res, 500, {
          type: "error",
          error: { type: "api_error", message: `mock failure: ${String(err)}` },
        });
      } else {
        res.end();
      }
    });
  });
  server.keepAliveTimeout = 1000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    script: (...turns) => {
      sticky = undefined;
      queue.push(...turns);
    },
    scriptFor: (text, ...turns) => {
      routes.push({ text, turns });
    },
    pending: () => queue.length,
    mainRequests: () =>
      requests.filter((r) => r.kind === "main").map((r) => r.body as MessagesBody),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
