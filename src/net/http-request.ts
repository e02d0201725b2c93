import type { IncomingHttpHeaders } from "node:http";
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import { BlockedAddressError, type CallbackTargets, literalAddress } from "./targets.js";

// One HTTP request to an address chosen by a hook's owner (a callback URL, a forge's API), whose
// socket connects only to the addresses CallbackTargets allows. No pooled socket, so that every
// request goes through the check; redirects are not followed. What went wrong is told as a short
// code, never as the socket's own text ("connect ECONNREFUSED 10.0.0.1:5432"), which would make
// the request a port scanner whose findings the hook's owner reads on the run.

/** TLS failures: certificate checks and handshake errors, by their Node or OpenSSL codes. */
const TLS_CODE = /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_|EPROTO$)/;
const DNS_CODE = /^(ENOTFOUND|EAI_)/;

export interface OutboundRequest {
  method: string;
  headers: Record<string, string>;
  body?: string;
  targets: CallbackTargets;
  signal: AbortSignal;
  /** Read at most this many bytes of the answer's body (0: none is read). */
  maxBodyBytes: number;
}

export interface OutboundAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  /** The body's first maxBodyBytes, as text. */
  body: string;
}

/** Rejects with BlockedAddressError for an address that may not be reached. */
export function outboundRequest(target: URL, opts: OutboundRequest): Promise<OutboundAnswer> {
  // A socket given an address (not a name) does no lookup: this is its check.
  const address = literalAddress(target);
  const why = address && opts.targets.blocked(address);
  if (why) return Promise.reject(new BlockedAddressError(why));
  return new Promise((resolve, reject) => {
    const request = target.protocol === "https:" ? httpsRequest : httpRequest;
    const headers =
      opts.body === undefined
        ? opts.headers
        : { ...opts.headers, "Content-Length": String(Buffer.byteLength(opts.body)) };
    const req = request(
      target,
      {
        method: opts.method,
        headers,
        lookup: opts.targets.lookup,
        agent: false,
        signal: opts.signal,
      },
      (res) => {
        const answer = { status: res.statusCode ?? 0, headers: res.headers };
        if (opts.maxBodyBytes === 0) {
          res.destroy();
          return resolve({ ...answer, body: "" });
        }
        const chunks: Buffer[] = [];
        let bytes = 0;
        res.on("data", (chunk: Buffer) => {
          const room = opts.maxBodyBytes - bytes;
          if (room > 0) chunks.push(chunk.subarray(0, room));
          bytes += chunk.length;
          if (bytes >= opts.maxBodyBytes) res.destroy();
        });
        const done = () => resolve({ ...answer, body: Buffer.concat(chunks).toString("utf8") });
        res.on("end", done);
        res.on("close", done);
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(opts.body);
  });
}

/** What went wrong with a request, as a short code that names no address or port. */
export function failureCode(err: unknown, at: { timedOut: boolean; stopped: boolean }): string {
  const code = (err as NodeJS.ErrnoException).code ?? "";
  if (at.timedOut) return "timeout";
  if (at.stopped) return "interrupted";
  if (err instanceof BlockedAddressError) return blockedText(err.why);
  if (DNS_CODE.test(code)) return "unresolvable";
  if (TLS_CODE.test(code)) return "tls_error";
  return "unreachable";
}

const blockedText = (why: string) => `blocked_address (${why})`;
