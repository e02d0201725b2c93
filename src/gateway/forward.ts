import type { IncomingMessage, ServerResponse } from "node:http";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { ModelCallRow } from "../store/schema.js";
import { type CallRefusal, refusalStatus } from "./admission.js";
import { type CallUsage, type ModelApi, noUsage, type Route } from "./api.js";
import { downstreamResponseHeaders, upstreamRequestHeaders } from "./headers.js";
import type { RunGrant } from "./tokens.js";
import type { UpstreamClient } from "./upstream.js";

// One call through the gateway: the caller's request, read whole (a model API's request is one
// JSON body, which the CLIs send whole), goes upstream with the operator's credential; the answer comes
// back as it comes, byte for byte: status, end-to-end headers, and a body piped through with
// back-pressure (the upstream is read no faster than the caller reads), its usage read on the
// way. Whatever the upstream does, the caller sees: an error status and body as it sent them, a
// stream cut where it cut it. A caller that goes away takes the upstream call with it.

/** A metered call as it went, before it is priced. */
export type MeteredCall = Omit<ModelCallRow, "id" | "costUsd">;

/** Largest request forwarded: the Messages API's own limit. */
export const MAX_REQUEST_BYTES = 32 * 1024 * 1024;

/** Most of a whole answer held until its call is recorded: far more than an answer's usual size. */
const MAX_HELD_BYTES = 8 * 1024 * 1024;

export interface ForwardedCall {
  api: ModelApi;
  route: Route;
  /** The API's path and query. */
  path: string;
  /** The run whose token the caller presented; absent on an open route. */
  grant: RunGrant | undefined;
  /** Told of a call refused. */
  refused(refusal: CallRefusal): void;
  /** Records a metered call (never rejects: a failure is logged). */
  record(call: MeteredCall): Promise<void>;
}

class RequestTooLarge extends Error {}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    bytes += chunk.length;
    if (bytes > MAX_REQUEST_BYTES) throw new RequestTooLarge();
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/** The model a Messages (or Responses) request asks for, for a call whose answer names none. */
function requestedModel(body: Buffer): string | null {
  try {
    const model = (JSON.parse(body.toString("utf8")) as { model?: unknown }).model;
    return typeof model === "string" ? model : null;
  } catch {
    return null;
  }
}

/** An answer of the gateway's own, in the API's shape (once nothing else has been answered). */
export function answer(
  res: ServerResponse,
  api: ModelApi,
  status: number,
  message: string,
  headers: Record<string, string> = {},
): void {
  if (res.headersSent || res.destroyed) return;
  const body = JSON.stringify(api.errorBody(status, message));
  res.writeHead(status, { "content-type": "application/json", ...headers }).end(body);
}

/** How a call went: what the caller got, what the answer reported, and why it fell short. */
interface Outcome {
  /** The status the caller got; 499 when it went away before the answer began. */
  status: number;
  usage: CallUsage;
  /** Null: answered in full. */
  error: string | null;
  requestId: string | null;
}

/** Why an answer that came was not complete; null when it was. */
function answerError(status: number, usage: CallUsage, broke: "caller" | "upstream" | undefined) {
  // Given whole, even to a caller that did not wait for its last bytes (codex lets a stream go once
  // its last event is in).
  if (status < 400 && usage.complete && !usage.errorType) return null;
  if (broke === "caller") return "the caller went away";
  if (broke === "upstream") return "the upstream's answer broke off";
  if (usage.errorType) return usage.errorType;
  if (status >= 400) return `http_${status}`;
  return usage.complete ? null : "the answer ended before it was complete";
}

/**
 * Forwards the call; resolves once it is over and, when the route is metered and a run's token was
 * presented, recorded (the run, the usage the answer reported, how it ended). A whole answer's last
 * bytes wait for its record: a caller that makes its next call once this one is answered is
 * admitted on a spend that counts it.
 */
export async function forward(
  req: IncomingMessage,
  res: ServerResponse,
  call: ForwardedCall,
  client: UpstreamClient,
): Promise<void> {
  const startedAt = new Date();
  const started = performance.now();
  const meter = call.route.metered && call.grant !== undefined;
  // The admission's reads go on while the request is read; a request that never comes whole
  // leaves their answer unread.
  const admission = meter ? call.grant?.admit() : undefined;
  admission?.catch(() => {});
  let body: Buffer;
  try {
    body = await readBody(req);
  } catch (err) {
    if (err instanceof RequestTooLarge) {
      answer(res, call.api, 413, `a request may have at most ${MAX_REQUEST_BYTES} bytes`);
    }
    // Otherwise the caller went away while sending it: nothing was spent.
    return undefined;
  }
  if (admission) {
    const refusal = (await admission)(requestedModel(body));
    if (refusal) {
      call.refused(refusal);
      // Not to be retried: asked again, the answer would be the same.
      answer(res, call.api, refusalStatus(refusal, call.api.refusals), refusal.message, {
        "x-should-retry": "false",
      });
      return undefined;
    }
  }
  // The caller went away while its call was admitted (its run's access closed): nothing is sent.
  if (res.destroyed) return;
  const { grant } = call;
  if (!meter || !grant) {
    await exchange(req, res, call, client, body, undefined);
    return;
  }
  let recording: Promise<void> | undefined;
  const record = (outcome: Outcome) => {
    const { usage } = outcome;
    recording ??= call.record({
      runId: grant.runId,
      endpoint: call.path.split("?")[0] ?? call.path,
      model: usage.model ?? requestedModel(body),
      inputTokens: usage.inputTokens,
      outputTokens: usage.outputTokens,
      cacheReadTokens: usage.cacheReadTokens,
      cacheCreationTokens: usage.cacheCreationTokens,
      status: outcome.status,
      error: outcome.error,
      requestId: outcome.requestId,
      startedAt,
      durationMs: Math.round(performance.now() - started),
    });
    return recording;
  };
  // A broken answer is recorded once it is over: the caller has no whole answer to wait for.
  await record(await exchange(req, res, call, client, body, record));
}

/**
 * The call upstream and its answer back to the caller; metered when `beforeEnd` is given, which
 * the whole answer's end then waits for.
 */
async function exchange(
  req: IncomingMessage,
  res: ServerResponse,
  { api, route, path }: ForwardedCall,
  client: UpstreamClient,
  body: Buffer,
  beforeEnd: ((outcome: Outcome) => Promise<void>) | undefined,
): Promise<Outcome> {
  const { response, abort } = client.send(api.upstream, {
    method: req.method ?? "GET",
    path,
    headers: upstreamRequestHeaders(req.headers, route.open ? {} : api.upstream.credential),
    body,
  });
  let upstream: IncomingMessage | undefined;
  let broke: "caller" | "upstream" | undefined;
  // Whichever end went first: the caller's socket closing before the answer was done (which takes
  // the upstream call with it), or the upstream's answer failing (which then closes the caller's).
  res.once("close", () => {
    if (res.writableFinished) return;
    broke ??= upstream?.destroyed ? "upstream" : "caller";
    abort();
  });
  try {
    upstream = await response;
  } catch (err) {
    if (broke === "caller") {
      return { status: 499, usage: noUsage(), error: "the caller went away", requestId: null };
    }
    const code = (err as NodeJS.ErrnoException).code ?? "no answer";
    const error = `the upstream API could not be reached (${code})`;
    answer(res, api, 502, error);
    return { status: 502, usage: noUsage(), error, requestId: null };
  }
  const status = upstream.statusCode ?? 502;
  res.writeHead(status, downstreamResponseHeaders(upstream.rawHeaders));
  const usageMeter = beforeEnd ? api.meter(upstream.headers["content-type"]) : undefined;
  const requestId = upstream.headers[api.requestIdHeader];
  const outcome = (): Outcome => {
    const usage = usageMeter?.usage() ?? noUsage();
    return {
      status,
      usage,
      error: answerError(status, usage, broke),
      requestId: typeof requestId === "string" ? requestId : null,
    };
  };
  // What the caller must not have before the call is recorded: a stream's last event (the CLI
  // goes on once it has it), or the whole of a body (it may be read by its length). Held bytes
  // are bounded: past the bound the meter reads no more, and the answer passes as it comes.
  let held: Buffer[] | undefined = usageMeter?.whole && beforeEnd ? [] : undefined;
  let heldBytes = 0;
  try {
    await pipeline(
      upstream,
      new Transform({
        transform(chunk: Buffer, _encoding, done) {
          usageMeter?.push(chunk);
          if (held) {
            held.push(chunk);
            heldBytes += chunk.length;
            if (heldBytes <= MAX_HELD_BYTES) return done();
            const all = Buffer.concat(held);
            held = undefined;
            return done(null, all);
          }
          if (beforeEnd && usageMeter?.ended) {
            beforeEnd(outcome()).then(() => done(null, chunk));
            return;
          }
          done(null, chunk);
        },
        flush(done) {
          const end = () => done(null, held ? Buffer.concat(held) : undefined);
          if (!beforeEnd) return end();
          beforeEnd(outcome()).then(end);
        },
      }),
      res,
    );
  } catch {
    broke ??= "upstream";
  }
  return outcome();
}
