import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { chunk } from "./mock-anthropic.js";

// A loopback stand-in for the OpenAI Responses API that the real `codex` binary talks to
// (a model provider in its config.toml whose base_url is `${mock.url}/v1`, see codex-env.ts).
// Each POST /v1/responses consumes the next scripted turn and is answered with Responses API
// SSE (response.created, output_item.added/done, output_text.delta, response.completed with
// usage), or with the response object whole when the request says `stream: false`; an empty queue
// answers with a default text. GET /v1/models lists one model. Every request is recorded so a test can
// check what the model saw (a resumed thread's request carries the earlier turns in `input`).

export type MockOutput =
  | { type: "message"; text: string }
  | { type: "reasoning"; text: string }
  /** A JSON-argument tool call; `arguments` is sent as a JSON string, as the API does. */
  | { type: "function_call"; name: string; arguments: Record<string, unknown>; callId?: string }
  /** A freeform tool call (raw text input), the shape the API uses for `apply_patch`. */
  | { type: "custom_tool_call"; name: string; input: string; callId?: string };

export interface MockUsage {
  input_tokens: number;
  cached_tokens: number;
  output_tokens: number;
}

export type MockTurn =
  | {
      output: MockOutput[];
      usage?: Partial<MockUsage>;
      /** Milliseconds to wait between SSE events (default 2). */
      delayMs?: number;
      /**
       * Called when the request arrives; the answer waits until what it returns settles
       * (`holdUntilReleased` in mock-anthropic.ts makes one).
       */
      hold?: () => Promise<unknown>;
    }
  /** An HTTP error response with an OpenAI error body. */
  | { error: { status: number; message: string; type?: string; code?: string } };

export interface RecordedRequest {
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  /** Parsed JSON body, or the raw text when it is not JSON (undefined when empty). */
  body: unknown;
  /** The response the mock gave: "scripted", "error", "default", "models" or "unknown-endpoint". */
  answeredWith: string;
}

/** One item of a request's `input`, loosely typed for assertions. */
export interface InputItem {
  type?: string;
  role?: string;
  content?: unknown;
  call_id?: string;
  output?: unknown;
  [k: string]: unknown;
}

/** The body of a recorded POST /v1/responses, loosely typed for assertions. */
export interface ResponsesBody {
  model: string;
  stream?: boolean;
  instructions?: string;
  tools?: Array<{ type: string; name?: string; [k: string]: unknown }>;
  input: InputItem[];
  [k: string]: unknown;
}

export interface MockOpenAI {
  /** http://127.0.0.1:PORT (codex's base_url is this plus `/v1`). */
  url: string;
  requests: RecordedRequest[];
  /** Appends turns to the queue; each POST /v1/responses consumes one. */
  script(...turns: MockTurn[]): void;
  /** Turns still queued. */
  pending(): number;
  /** The POST /v1/responses bodies, in order. */
  responsesRequests(): ResponsesBody[];
  close(): Promise<void>;
}

export interface MockOptions {
  /** Text of the turn given when the queue is empty. */
  defaultText?: string;
  /** No console warning for unexpected endpoints. */
  quiet?: boolean;
}

/** The model the mock lists (GET /v1/models). */
export const MOCK_MODEL = "gpt-5.5";

export const DEFAULT_USAGE: MockUsage = { input_tokens: 100, cached_tokens: 0, output_tokens: 20 };

/** The text of every `input_text`/`output_text` part of the messages of `role` in a request. */
export function messageTexts(body: ResponsesBody | undefined, role: string): string[] {
  const texts: string[] = [];
  for (const item of body?.input ?? []) {
    if (item.type !== "message" || item.role !== role) continue;
    if (typeof item.content === "string") texts.push(item.content);
    else if (Array.isArray(item.content))
      for (const part of item.content as Array<{ text?: unknown }>)
        if (typeof part.text === "string") texts.push(part.text);
  }
  return texts;
}

/** The output a request carries for the tool call `callId` (what a command printed). */
export function callOutput(body: ResponsesBody | undefined, callId: string): string | undefined {
  const item = body?.input.find(
    (i) =>
      (i.type === "function_call_output" || i.type === "custom_tool_call_output") &&
      i.call_id === callId,
  );
  if (item === undefined) return undefined;
  return typeof item.output === "string" ? item.output : JSON.stringify(item.output);
}

/** The model runs `cmd` through codex's shell tool (`exec_command`, codex 0.171's unified exec). */
export function shellCall(cmd: string, callId?: string): MockOutput {
  return { type: "function_call", name: "exec_command", arguments: { cmd }, callId };
}

/** The model writes `path` (relative to the work dir) with `apply_patch`, codex's file tool. */
export function addFilePatch(path: string, text: string, callId?: string): MockOutput {
  const lines = text.split("\n").map((line) => `+${line}`);
  const input = ["*** Begin Patch", `*** Add File: ${path}`, ...lines, "*** End Patch", ""];
  return { type: "custom_tool_call", name: "apply_patch", input: input.join("\n"), callId };
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

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json", "x-request-id": id("req") });
  res.end(JSON.stringify(body));
}

/** The events of one output item, as the Responses API streams it. */
function itemEvents(out: MockOutput, index: number): Array<Record<string, unknown>> {
  const output_index = index;
  switch (out.type) {
    case "message": {
      const item = { type: "message", role: "assistant", id: id("msg"), status: "completed" };
      return [
        { type: "response.output_item.added", output_index, item: { ...item, content: [] } },
        ...chunk(out.text).map((delta) => ({
          type: "response.output_text.delta",
          output_index,
          item_id: item.id,
          content_index: 0,
          delta,
        })),
        {
          type: "response.output_item.done",
          output_index,
          item: { ...item, content: [{ type: "output_text", text: out.text, annotations: [] }] },
        },
      ];
    }
    case "reasoning": {
      const item = { type: "reasoning", id: id("rs") };
      return [
        { type: "response.output_item.added", output_index, item: { ...item, summary: [] } },
        { type: "response.reasoning_summary_part.added", output_index, summary_index: 0 },
        ...chunk(out.text).map((delta) => ({
          type: "response.reasoning_summary_text.delta",
          output_index,
          item_id: item.id,
          summary_index: 0,
          delta,
        })),
        {
          type: "response.output_item.done",
          output_index,
          item: { ...item, summary: [{ type: "summary_text", text: out.text }] },
        },
      ];
    }
    case "function_call": {
      const item = {
        type: "function_call",
        id: id("fc"),
        call_id: out.callId ?? id("call"),
        name: out.name,
        arguments: JSON.stringify(out.arguments),
        status: "completed",
      };
      return [
        { type: "response.output_item.added", output_index, item: { ...item, arguments: "" } },
        { type: "response.output_item.done", output_index, item },
      ];
    }
    case "custom_tool_call": {
      const item = {
        type: "custom_tool_call",
        id: id("ctc"),
        call_id: out.callId ?? id("call"),
        name: out.name,
        input: out.input,
        status: "completed",
      };
      return [
        { type: "response.output_item.added", output_index, item: { ...item, input: "" } },
        { type: "response.output_item.done", output_index, item },
      ];
    }
  }
}

/** A turn's usage as the API reports it. */
function usageOf(turn: Extract<MockTurn, { output: MockOutput[] }>): Record<string, unknown> {
  const usage: MockUsage = { ...DEFAULT_USAGE, ...turn.usage };
  return {
    input_tokens: usage.input_tokens,
    input_tokens_details: { cached_tokens: usage.cached_tokens },
    output_tokens: usage.output_tokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: usage.input_tokens + usage.output_tokens,
  };
}

/** A turn answered whole (`stream: false`): the response object, its items as they end. */
function sendWhole(
  res: ServerResponse,
  model: string,
  turn: Extract<MockTurn, { output: MockOutput[] }>,
): void {
  const output = turn.output.map((out, index) => itemEvents(out, index).at(-1)?.item);
  sendJson(res, 200, {
    id: id("resp"),
    object: "response",
    model,
    status: "completed",
    output,
    usage: usageOf(turn),
  });
}

async function streamTurn(
  res: ServerResponse,
  model: string,
  turn: Extract<MockTurn, { output: MockOutput[] }>,
): Promise<void> {
  const delay = turn.delayMs ?? 2;
  const responseId = id("resp");
  res.writeHead(200, {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    connection: "keep-alive",
    "x-request-id": id("req"),
  });
  let sequence = 0;
  const send = async (data: Record<string, unknown>) => {
    res.write(
      `event: ${String(data.type)}\ndata: ${JSON.stringify({ ...data, sequence_number: sequence++ })}\n\n`,
    );
    if (delay > 0) await sleep(delay);
  };
  const response = { id: responseId, object: "response", model, status: "in_progress" };
  await send({ type: "response.created", response: { ...response, output: [] } });
  for (const [index, out] of turn.output.entries()) {
    for (const event of itemEvents(out, index)) await send(event);
  }
  await send({
    type: "response.completed",
    response: {
      ...response,
      status: "completed",
      usage: usageOf(turn),
    },
  });
  res.end();
}

export async function startMockOpenAI(options: MockOptions = {}): Promise<MockOpenAI> {
  const queue: MockTurn[] = [];
  const requests: RecordedRequest[] = [];
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
      answeredWith: "",
    };
    requests.push(rec);

    if (req.method === "POST" && path === "/v1/responses") {
      const rb = (body ?? {}) as ResponsesBody;
      const turn = queue.shift();
      rec.answeredWith = turn ? ("error" in turn ? "error" : "scripted") : "default";
      if (turn && "error" in turn) {
        sendJson(res, turn.error.status, {
          error: {
            message: turn.error.message,
            type: turn.error.type ?? "invalid_request_error",
            param: null,
            code: turn.error.code ?? null,
          },
        });
        return;
      }
      const answer = turn ?? { output: [{ type: "message" as const, text: defaultText }] };
      if (answer.hold) {
        await answer.hold();
        // codex may have gone while the answer was held.
        if (!res.socket || res.socket.destroyed) return;
      }
      const model = typeof rb.model === "string" ? rb.model : "mock-model";
      if (rb.stream === false) sendWhole(res, model, answer);
      else await streamTurn(res, model, answer);
      return;
    }

    if (req.method === "GET" && path === "/v1/models") {
      rec.answeredWith = "models";
      sendJson(res, 200, { object: "list", data: [{ id: MOCK_MODEL, object: "model" }] });
      return;
    }

    // Anything else: worth a warning, answered harmlessly so that codex neither hangs nor fails.
    rec.answeredWith = "unknown-endpoint";
    if (!options.quiet) console.warn(`mock-openai: unexpected ${rec.method} ${path}`);
    sendJson(res, 404, { error: { message: "not found", type: "invalid_request_error" } });
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) {
        sendJson(res, 500, {
          error: { message: `mock failure: ${String(err)}`, type: "server_error" },
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
      queue.push(...turns);
    },
    pending: () => queue.length,
    responsesRequests: () =>
      requests
        .filter((r) => r.method === "POST" && r.path === "/v1/responses")
        .map((r) => r.body as ResponsesBody),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
