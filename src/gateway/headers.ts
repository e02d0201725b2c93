import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http";

// Which headers cross the gateway. End-to-end headers pass as they came (the CLI's
// anthropic-version and anthropic-beta one way, the API's request-id, retry-after and rate-limit
// headers the other); hop-by-hop headers (RFC 9110 section 7.6.1) are of one connection and stay
// on it; a caller's credential never reaches the upstream, which gets the operator's instead.

const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
]);

/** The caller's credential, in either of the ways the model APIs take one. */
const CREDENTIALS = new Set(["authorization", "x-api-key"]);

/** Hop-by-hop headers, and those the `Connection` header names as such. */
function hopByHop(connection: string | string[] | undefined): Set<string> {
  const named = [connection ?? []]
    .flat()
    .flatMap((value) => value.split(","))
    .map((name) => name.trim().toLowerCase())
    .filter(Boolean);
  return new Set([...HOP_BY_HOP, ...named]);
}

/**
 * The headers of a call as it goes upstream: the caller's end-to-end headers without its
 * credential, with `credential` (the operator's) instead. `host` and `content-length` are the
 * request's to the upstream, set by the client that sends it. The body is asked for unencoded,
 * so that the gateway can read its usage as it passes: the last hop, to the CLI on loopback,
 * gains nothing from compression anyway.
 */
export function upstreamRequestHeaders(
  incoming: IncomingHttpHeaders,
  credential: Record<string, string>,
): OutgoingHttpHeaders {
  const dropped = hopByHop(incoming.connection);
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(incoming)) {
    if (value === undefined || dropped.has(name) || CREDENTIALS.has(name)) continue;
    if (name === "host" || name === "content-length" || name === "accept-encoding") continue;
    out[name] = value;
  }
  return { ...out, ...credential, "accept-encoding": "identity" };
}

/** The upstream's response headers as they go to the caller (`rawHeaders` form: name, value, …). */
export function downstreamResponseHeaders(rawHeaders: string[]): string[] {
  const connection: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i]?.toLowerCase() === "connection") connection.push(rawHeaders[i + 1] ?? "");
  }
  const dropped = hopByHop(connection);
  const out: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] ?? "";
    if (!dropped.has(name.toLowerCase())) out.push(name, rawHeaders[i + 1] ?? "");
  }
  return out;
}
