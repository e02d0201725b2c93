import http, { type IncomingMessage, type ServerResponse } from "node:http";
import { connect, isIP, type Socket } from "node:net";
import type { Duplex } from "node:stream";
import { pipeline } from "node:stream/promises";
import { errorText, type Logger } from "../log.js";
import { BlockedAddressError, CallbackTargets } from "../net/targets.js";
import type { RunGrant } from "./tokens.js";

// A sandboxed run has a network namespace of its own (src/process/sandbox.ts): nothing outside it
// answers but the gateway, whose port is forwarded in. Besides the model APIs, the gateway is an
// HTTP proxy there (CONNECT for TLS, absolute-URI requests for plain HTTP), with the run's token
// as the proxy's password, and lets through only what the run's key allows: its `egress` list,
// empty unless an admin writes one. It is checked here, outside the sandbox, where the agent
// cannot change it. A name in the list reaches only global unicast addresses, the names' own
// resolution checked at the connect (DNS rebinding, as for callbacks); an address written in the
// list is reached as written, loopback or private too: the admin named it.

/**
 * One entry of a key's egress list: `host`, `*.host` or an IP address, with `:port` or not; or
 * `*`, any host (global unicast only).
 */
export interface EgressRule {
  /** Lower case, without IPv6's brackets; for `*.example.com`, `example.com`; `*`: any. */
  host: string;
  /** `*.`: the names under `host`, not `host` itself. */
  subdomains: boolean;
  /** Null: 80 and 443 (HTTP and HTTPS). */
  port: number | null;
}

/** An egress entry that cannot be read (400, naming it). */
export class EgressRuleError extends Error {}

const ANY = "*";
const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;
const DEFAULT_PORTS = [80, 443];

/** Reads one entry of a key's `egress` list. */
export function parseEgressRule(text: string): EgressRule {
  const match = /^(?:\[([0-9a-f:.]+)\]|([^:[\]]+))(?::(\d{1,5}))?$/i.exec(text.trim());
  const host = (match?.[1] ?? match?.[2] ?? "").toLowerCase();
  const port = match?.[3] === undefined ? null : Number(match[3]);
  const fail = (why: string) =>
    new EgressRuleError(`${JSON.stringify(text)} is not an egress entry: ${why}`);
  if (!match) throw fail("expected host, *.host or an IP address, with :port or not");
  if (port !== null && (port < 1 || port > 65_535)) throw fail("its port is not 1 to 65535");
  if (match[1] !== undefined) {
    if (isIP(host) !== 6) throw fail("expected an IPv6 address in the brackets");
    return { host, subdomains: false, port };
  }
  if (isIP(host) === 4 || host === ANY) return { host, subdomains: false, port };
  const subdomains = host.startsWith("*.");
  const name = subdomains ? host.slice(2) : host;
  const labels = name.replace(/\.$/, "").split(".");
  if (name.length > 253 || !labels.every((label) => LABEL.test(label))) {
    throw fail("expected a DNS name (letters, digits, hyphens), optionally starting with *.");
  }
  return { host: labels.join("."), subdomains, port };
}

/** An IPv6 address without the brackets a URL or CONNECT line writes it in; else as it is. */
const unbracketed = (host: string) => host.replace(/^\[(.*)\]$/, "$1");

/** The rule that lets a connection to `host`:`port` through, if any. */
export function matchingRule(
  rules: readonly EgressRule[],
  host: string,
  port: number,
): EgressRule | undefined {
  const name = unbracketed(host).toLowerCase().replace(/\.$/, "");
  return rules.find(
    (rule) =>
      (rule.port === null ? DEFAULT_PORTS.includes(port) : rule.port === port) &&
      (rule.host === ANY ||
        (rule.subdomains ? name.endsWith(`.${rule.host}`) : name === rule.host)),
  );
}

/** Where a run may connect: what its key's list allows, and its own list too when it has one. */
export interface EgressLists {
  key: readonly string[];
  /** A narrowing for this run alone (a fork's pull request); null: none. */
  run: readonly string[] | null;
}

export interface EgressOptions {
  /** The grant of a live run token. */
  grantOf(token: string): RunGrant | undefined;
  /** The egress lists of the run, as stored now (a narrowed list holds at once). */
  rulesOf(runId: string): Promise<{ key: EgressRule[]; run: EgressRule[] | null }>;
  logger: Logger;
}

/** Let through: by a rule that names an address (reached as is) or a name (global unicast only). */
interface Allowed {
  literal: boolean;
}

interface Refused {
  status: number;
  message: string;
}

/** How long a connection to a destination may take to open. */
const CONNECT_TIMEOUT_MS = 30_000;
/** How long a tunnel may carry nothing either way before it is closed. */
const TUNNEL_IDLE_MS = 10 * 60 * 1000;

export class EgressProxy {
  /** Names reach only global unicast addresses; a literal address in a rule is reached as is. */
  private readonly targets = new CallbackTargets([]);
  /** Every CONNECT's socket, and both ends of every open tunnel: the gateway's close ends them. */
  private readonly sockets = new Set<Duplex>();

  constructor(private readonly opts: EgressOptions) {}

  /** A CONNECT request: a tunnel to `host:port` once the run's key allows it. */
  async tunnel(req: IncomingMessage, client: Duplex, head: Buffer): Promise<void> {
    client.on("error", () => client.destroy());
    this.hold(client);
    const target = /^(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(req.url ?? "");
    if (!target?.[1] || !target[2]) return refuse(client, 400, "expected CONNECT host:port");
    const allowed = await this.check(req, target[1], Number(target[2]));
    if ("status" in allowed) return refuse(client, allowed.status, allowed.message);
    let upstream: Socket;
    try {
      upstream = await this.open(allowed, target[1], Number(target[2]));
    } catch (err) {
      return refuse(client, ...unreachable(req.url ?? "", err));
    }
    client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
    if (head.length > 0) upstream.write(head);
    this.hold(upstream);
    await Promise.all([
      pipeline(client, upstream).catch(() => undefined),
      pipeline(upstream, client).catch(() => undefined),
    ]);
  }

  /** Ends every CONNECT's socket and tunnel. */
  close(): void {
    for (const socket of this.sockets) socket.destroy();
  }

  /** Kept until it closes, and closed once idle for a while (a tunnel nobody uses any more). */
  private hold(socket: Duplex): void {
    this.sockets.add(socket);
    socket.once("close", () => this.sockets.delete(socket));
    (socket as Socket).setTimeout?.(TUNNEL_IDLE_MS, () => socket.destroy());
  }

  /** A plain-HTTP request by absolute URI, forwarded once the run's key allows its host. */
  async forward(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let url: URL;
    try {
      url = new URL(req.url ?? "");
    } catch {
      return answer(res, 400, "expected an absolute http:// URL");
    }
    if (url.protocol !== "http:") return answer(res, 400, "only http:// goes by URL; use CONNECT");
    const port = Number(url.port || 80);
    const allowed = await this.check(req, url.hostname, port);
    if ("status" in allowed) return answer(res, allowed.status, allowed.message);
    const headers = { ...req.headers };
    delete headers["proxy-authorization"];
    delete headers["proxy-connection"];
    const outgoing = http.request(url, {
      method: req.method ?? "GET",
      headers,
      agent: false,
      ...(allowed.literal ? {} : { lookup: this.targets.lookup }),
    });
    res.once("close", () => outgoing.destroy());
    try {
      const [incoming] = await Promise.all([
        new Promise<IncomingMessage>((resolve, reject) => {
          outgoing.once("response", resolve);
          outgoing.once("error", reject);
        }),
        pipeline(req, outgoing),
      ]);
      res.writeHead(incoming.statusCode ?? 502, incoming.rawHeaders);
      await pipeline(incoming, res);
    } catch (err) {
      // Cut off mid-answer: the client sees the cut, as it would from the host itself.
      if (res.headersSent) res.destroy();
      else answer(res, ...unreachable(url.host, err));
    }
  }

  /** The rule that allows the run to reach `host:port`; else why not. */
  private async check(
    req: IncomingMessage,
    host: string,
    port: number,
  ): Promise<Allowed | Refused> {
    const grant = this.grantOf(req);
    if (!grant) return { status: 407, message: "the run's token is the proxy's password" };
    let rules: { key: EgressRule[]; run: EgressRule[] | null };
    try {
      rules = await this.opts.rulesOf(grant.runId);
    } catch (err) {
      this.opts.logger.error("could not read a run's egress list", {
        run_id: grant.runId,
        error: errorText(err),
      });
      return { status: 503, message: "the run's egress list could not be read; try again" };
    }
    const rule = matchingRule(rules.key, host, port);
    const own = rules.run && matchingRule(rules.run, host, port);
    if (!rule || own === undefined) {
      this.opts.logger.info("egress refused", { run_id: grant.runId, host, port });
      return {
        status: 403,
        message: rule
          ? `${host}:${port} is not in the run's own egress list (a fork's pull request)`
          : `${host}:${port} is not in the egress list of the run's API key`,
      };
    }
    // A name's addresses are checked as it resolves; an address asked for directly, here. Under
    // two lists, only as written in both.
    const literal = isIP(rule.host) !== 0 && (!own || isIP(own.host) !== 0);
    const address = unbracketed(host);
    const why = !literal && isIP(address) ? this.targets.blocked(address) : undefined;
    if (why) {
      return {
        status: 403,
        message: `${host}:${port} is ${why}: only an address written in the egress list reaches it`,
      };
    }
    return { literal };
  }

  /** The run of the token the client presented as the proxy's password (any user name). */
  private grantOf(req: IncomingMessage): RunGrant | undefined {
    const basic = /^Basic +(\S+)$/i.exec(req.headers["proxy-authorization"] ?? "");
    if (!basic?.[1]) return undefined;
    const decoded = Buffer.from(basic[1], "base64").toString("utf8");
    const token = decoded.slice(decoded.indexOf(":") + 1);
    return this.opts.grantOf(token);
  }

  private open(allowed: Allowed, host: string, port: number): Promise<Socket> {
    return new Promise((resolve, reject) => {
      const socket = connect({
        host: unbracketed(host),
        port,
        timeout: CONNECT_TIMEOUT_MS,
        ...(allowed.literal ? {} : { lookup: this.targets.lookup }),
      });
      socket.once("connect", () => {
        socket.setTimeout(0);
        resolve(socket);
      });
      socket.once("timeout", () => socket.destroy(new Error("timed out")));
      socket.once("error", reject);
    });
  }
}

/** Why `target` was not reached: 403 for a name that resolved where names may not go. */
function unreachable(target: string, err: unknown): [number, string] {
  if (err instanceof BlockedAddressError) {
    return [
      403,
      `${target} resolves to an address that is ${err.why}: only an address written in the egress list reaches it`,
    ];
  }
  return [502, `could not reach ${target}: ${errorText(err)}`];
}

/** Answers a CONNECT it does not open, and closes the socket once the answer is out. */
function refuse(client: Duplex, status: number, message: string): void {
  const auth = status === 407 ? 'Proxy-Authenticate: Basic realm="agent-bridge"\r\n' : "";
  // Not left half-open on a client that never closes its end.
  client.end(
    `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\n${auth}Content-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(message) + 1}\r\nConnection: close\r\n\r\n${message}\n`,
    () => client.destroy(),
  );
}

function answer(res: ServerResponse, status: number, message: string): void {
  if (res.headersSent) return;
  res
    .writeHead(status, {
      "content-type": "text/plain",
      ...(status === 407 ? { "proxy-authenticate": 'Basic realm="agent-bridge"' } : {}),
    })
    .end(`${message}\n`);
}
