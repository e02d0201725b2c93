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
 *
 * A `HEAD` (the CLI's connectivity check) goes on a connection of its own, closed after it: Node's
 * client cannot tell where the answer to a `HEAD` without a `Content-Length` ends, so it closes
 * the connection the answer came on. Taken from the kept ones, that would be the connection the
 * run's first Messages call was to reuse, which would then wait for a new one.
 */
export class UpstreamClient {
  /** By the upstream's protocol, its proxy URL (if any), and whether its connections are kept. */
  private readonly agents = new Map<string, http.Agent>();

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
          agent: this.agent(url, call.method !== "HEAD"),
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

  /**
   * The agent for `url`, whose connections are `kept` or not: a proxy's, when the environment
   * names one for it.
   */
  private agent(url: URL, kept: boolean): http.Agent {
    const protocol = url.protocol === "https:" ? "https:" : "http:";
    const proxy = getProxyForUrl(url.href);
    const key = `${protocol} ${proxy} ${kept}`;
    let agent = this.agents.get(key);
    if (!agent) {
      const options = { keepAlive: kept };
      // A tunnel (CONNECT) for TLS, whose bytes the proxy cannot read; plain HTTP by full URL.
      if (!proxy) {
        agent = protocol === "https:" ? new https.Agent(options) : new http.Agent(options);
      } else {
        agent =
          protocol === "https:"
            ? new HttpsProxyAgent(proxy, options)
            : new HttpProxyAgent(proxy, options);
      }
      this.agents.set(key, agent);
    }
    return agent;
  }

  close(): void {
    for (const agent of this.agents.values()) agent.destroy();
  }
}
