import http, { type IncomingMessage, type OutgoingHttpHeaders } from "node:http";
import https from "node:https";
import { HttpProxyAgent } from "http-proxy-agent";
import { HttpsProxyAgent } from "https-proxy-agent";
import { getProxyForUrl } from "proxy-from-env";

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

/**
 * Sends calls upstream over kept-alive connections, so that a call pays no new TLS handshake;
 * through the proxy the server's environment names for the upstream's URL (`HTTPS_PROXY`,
 * `HTTP_PROXY`, less `NO_PROXY`, as curl and the CLIs read them), as the CLI went before the
 * gateway stood between it and its API.
 */
export class UpstreamClient {
  private readonly agents = {
    "http:": new http.Agent({ keepAlive: true }),
    "https:": new https.Agent({ keepAlive: true }),
  };
  /** By proxy URL and the upstream's protocol. */
  private readonly proxied = new Map<string, http.Agent>();

  /**
   * The call, sent; `response` settles once the upstream's status and headers are in (its body is
   * then the caller's to read), or fails when the upstream cannot be reached. `abort` gives up on
   * it (the caller went away).
   *
   * A kept-alive connection the upstream closed idle just as it was taken fails with ECONNRESET
   * before any answer: the API closed it without reading the call, so the call goes again on a new
   * connection (Node's `request.reusedSocket` advice) rather than failing a run on a race of
   * idle timers.
   */
  send(
    upstream: Upstream,
    call: UpstreamCall,
  ): { response: Promise<IncomingMessage>; abort(): void } {
    const url = new URL(upstream.baseUrl.replace(/\/+$/, "") + call.path);
    const transport = url.protocol === "https:" ? https : http;
    const headers =
      call.body.length > 0 ? { ...call.headers, "content-length": call.body.length } : call.headers;
    let request: http.ClientRequest;
    let aborted = false;
    const response = new Promise<IncomingMessage>((resolve, reject) => {
      const attempt = () => {
        const sent = transport.request(url, {
          method: call.method,
          headers,
          agent: this.agent(url),
        });
        request = sent;
        let answered = false;
        sent.once("response", (res) => {
          answered = true;
          resolve(res);
        });
        // Kept on for good: a request's error after its response (its socket cut) must not go
        // unheard; the response's stream reports it to whoever reads it.
        sent.on("error", (err: NodeJS.ErrnoException) => {
          const stale = sent.reusedSocket && err.code === "ECONNRESET";
          if (stale && !answered && !aborted) attempt();
          else reject(err);
        });
        sent.end(call.body);
      };
      attempt();
    });
    return {
      response,
      abort: () => {
        aborted = true;
        request.destroy();
      },
    };
  }

  /** The agent for `url`: a proxy's, when the environment names one for it. */
  private agent(url: URL): http.Agent {
    const protocol = url.protocol === "https:" ? "https:" : "http:";
    const proxy = getProxyForUrl(url.href);
    if (!proxy) return this.agents[protocol];
    const key = `${protocol} ${proxy}`;
    let agent = this.proxied.get(key);
    if (!agent) {
      // A tunnel (CONNECT) for TLS, whose bytes the proxy cannot read; plain HTTP by full URL.
      agent =
        protocol === "https:"
          ? new HttpsProxyAgent(proxy, { keepAlive: true })
          : new HttpProxyAgent(proxy, { keepAlive: true });
      this.proxied.set(key, agent);
    }
    return agent;
  }

  close(): void {
    for (const agent of [...Object.values(this.agents), ...this.proxied.values()]) agent.destroy();
  }
}
