import http, { type IncomingMessage, type OutgoingHttpHeaders } from "node:http";
import https from "node:https";

// The model API the gateway forwards to, and the connections it keeps to it.

/** An upstream model API, as the operator configured it. */
export interface Upstream {
  /** Its base URL: a call's path (`/v1/messages`) is appended to it. */
  baseUrl: string;
  /** The headers that carry the operator's credential. */
  credential: Record<string, string>;
}

export interface UpstreamCall {
  method: string;
  /** The API's path and query, as the caller asked for it (`/v1/messages?beta=true`). */
  path: string;
  headers: OutgoingHttpHeaders;
  body: Buffer;
}

/** Sends calls upstream over kept-alive connections, so that a call pays no new TLS handshake. */
export class UpstreamClient {
  private readonly agents = {
    "http:": new http.Agent({ keepAlive: true }),
    "https:": new https.Agent({ keepAlive: true }),
  };

  /**
   * The call's request, sent; `response` settles once the upstream's status and headers are in
   * (its body is then the caller's to read), or fails when the upstream cannot be reached.
   */
  send(
    upstream: Upstream,
    call: UpstreamCall,
  ): { request: http.ClientRequest; response: Promise<IncomingMessage> } {
    const url = new URL(upstream.baseUrl.replace(/\/+$/, "") + call.path);
    const transport = url.protocol === "https:" ? https : http;
    const headers =
      call.body.length > 0 ? { ...call.headers, "content-length": call.body.length } : call.headers;
    const request = transport.request(url, {
      method: call.method,
      headers,
      agent: this.agents[url.protocol === "https:" ? "https:" : "http:"],
    });
    const response = new Promise<IncomingMessage>((resolve, reject) => {
      request.once("response", resolve);
      // Kept on for good: a request's error after its response (its socket cut) must not go
      // unheard; the response's stream reports it to whoever reads it.
      request.on("error", reject);
    });
    request.end(call.body);
    return { request, response };
  }

  close(): void {
    for (const agent of Object.values(this.agents)) agent.destroy();
  }
}
