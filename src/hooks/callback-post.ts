import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import { BlockedAddressError, type CallbackTargets, literalAddress } from "../net/targets.js";

// One POST of a callback, through the address checks of CallbackTargets. What went wrong is told
// as a short code (`unreachable`, `timeout`, `http_503`…), never as the socket's own text
// ("connect ECONNREFUSED 10.0.0.1:5432"), which would make the callback a port scanner whose
// findings the hook's owner reads on the run.

export type PostOutcome =
  | { ok: true; status: number }
  /** `error` is shown on the run; `cause`, the socket's own text, is for the server's log. */
  | { ok: false; status: number | null; error: string; cause?: string };

export interface PostOptions {
  targets: CallbackTargets;
  timeoutMs: number;
  /** Aborted when the server stops: the attempt is abandoned. */
  stopping: AbortSignal;
}

/** TLS failures: certificate checks and handshake errors, by their Node or OpenSSL codes. */
const TLS_CODE = /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_|EPROTO$)/;
const DNS_CODE = /^(ENOTFOUND|EAI_)/;

export async function postCallback(
  url: string,
  headers: Record<string, string>,
  body: string,
  opts: PostOptions,
): Promise<PostOutcome> {
  const target = new URL(url);
  // Refused at registration; a hook stored before that was refused still does not send them.
  if (target.username || target.password) {
    return { ok: false, status: null, error: "credentials_in_url" };
  }
  const address = literalAddress(target);
  // A socket given an address (not a name) does no lookup: this is its check.
  const why = address && opts.targets.blocked(address);
  if (why) return { ok: false, status: null, error: blockedText(why) };
  const timeout = AbortSignal.timeout(opts.timeoutMs);
  try {
    const status = await send(
      target,
      headers,
      body,
      opts.targets,
      AbortSignal.any([timeout, opts.stopping]),
    );
    if (status >= 200 && status < 300) return { ok: true, status };
    return { ok: false, status, error: `http_${status}` };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? "";
    const error = timeout.aborted
      ? "timeout"
      : opts.stopping.aborted
        ? "interrupted"
        : err instanceof BlockedAddressError
          ? blockedText(err.why)
          : DNS_CODE.test(code)
            ? "unresolvable"
            : TLS_CODE.test(code)
              ? "tls_error"
              : "unreachable";
    return {
      ok: false,
      status: null,
      error,
      cause: err instanceof Error ? err.message : String(err),
    };
  }
}

const blockedText = (why: string) => `blocked_address (${why})`;

/** The status of the answer; its body is not read. Redirects are not followed. */
function send(
  target: URL,
  headers: Record<string, string>,
  body: string,
  targets: CallbackTargets,
  signal: AbortSignal,
): Promise<number> {
  return new Promise((resolve, reject) => {
    const request = target.protocol === "https:" ? httpsRequest : httpRequest;
    const req = request(
      target,
      {
        method: "POST",
        headers: { ...headers, "Content-Length": String(Buffer.byteLength(body)) },
        lookup: targets.lookup,
        // No pooled socket: every attempt connects through the check.
        agent: false,
        signal,
      },
      (res) => {
        resolve(res.statusCode ?? 0);
        res.destroy();
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}
