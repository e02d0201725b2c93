import type { IncomingHttpHeaders } from "node:http";
import type { RefusalStatuses } from "./admission.js";
import type { Upstream } from "./upstream.js";

// What the gateway knows of one model API (./anthropic.ts, ./openai.ts): which of its calls it
// forwards, how a caller presents its run's token, how the API says no, and how a call's usage is
// read from its response. The forwarding itself is the same for every API (./forward.ts).

/** A call the gateway forwards. */
export interface Route {
  /** Its usage is read and recorded (a call that spends tokens). */
  metered: boolean;
  /**
   * Forwarded without a run's token and without the operator's credential: a connectivity check
   * of the CLI's, which carries no credential and spends nothing.
   */
  open: boolean;
}

/** A call's usage and outcome as its response told them. */
export interface CallUsage {
  /** The model that answered, as the response names it; null when it does not. */
  model: string | null;
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheCreationTokens: number;
  /** The API's own error type, when the response was an error (also one inside a stream). */
  errorType: string | null;
  /** The response said it was complete (a stream's last event came, a whole body parsed). */
  complete: boolean;
}

/** A call's usage before anything of its answer is read (or when nothing was). */
export const noUsage = (): CallUsage => ({
  model: null,
  inputTokens: 0,
  outputTokens: 0,
  cacheReadTokens: 0,
  cacheCreationTokens: 0,
  errorType: null,
  complete: false,
});

/** Reads a call's usage from its response's bytes as they pass, without holding them up. */
export interface UsageMeter {
  push(chunk: Buffer): void;
  /** What the bytes so far said. */
  usage(): CallUsage;
  /** The answer is one body, read once it has ended (not a stream of events). */
  readonly whole: boolean;
  /** A stream has sent its last event: what follows is its close. */
  readonly ended: boolean;
}

export interface ModelApi {
  /** The first segment of the gateway's paths for this API (`/anthropic/v1/messages`). */
  readonly prefix: string;
  readonly upstream: Upstream;
  /** The call, when the gateway forwards it; undefined for any other. */
  route(method: string, path: string): Route | undefined;
  /** The token a caller presents, in the API's own way(s); undefined when it presents none. */
  tokenOf(headers: IncomingHttpHeaders): string | undefined;
  /** The response header in which the upstream names its request, for its support. */
  readonly requestIdHeader: string;
  /** The statuses it answers a call the bridge refuses with (./admission.ts). */
  readonly refusals: RefusalStatuses;
  /** An error answered by the gateway itself, in the API's own shape. */
  errorBody(status: number, message: string): Record<string, unknown>;
  /** A meter for a metered call's response, given its content type. */
  meter(contentType: string | undefined): UsageMeter;
}
