import { failureCode, outboundRequest } from "../net/http-request.js";
import { BlockedAddressError, type CallbackTargets } from "../net/targets.js";

// One POST of a callback, through the address checks of CallbackTargets. What went wrong is told
// as a short code (`unreachable`, `timeout`, `http_503`…; see failureCode).

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
  const timeout = AbortSignal.timeout(opts.timeoutMs);
  try {
    const { status } = await outboundRequest(target, {
      method: "POST",
      headers,
      body,
      targets: opts.targets,
      signal: AbortSignal.any([timeout, opts.stopping]),
      maxBodyBytes: 0,
    });
    if (status >= 200 && status < 300) return { ok: true, status };
    return { ok: false, status, error: `http_${status}` };
  } catch (err) {
    return {
      ok: false,
      status: null,
      error: failureCode(err, { timedOut: timeout.aborted, stopped: opts.stopping.aborted }),
      // A refused address is said in `error`; a socket's own text only goes to the log.
      ...(err instanceof BlockedAddressError ? {} : { cause: String(err) }),
    };
  }
}
