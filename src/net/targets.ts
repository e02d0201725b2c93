import { lookup as dnsLookup, type LookupAddress, type LookupAllOptions } from "node:dns";
import { BlockList, isIP, type LookupFunction } from "node:net";
import ipaddr from "ipaddr.js";

// Where a callback may go. A hook's callback_url is chosen by whoever registers the hook, and the
// bridge POSTs to it from inside the network: without this, a callback could reach the database,
// the cloud's metadata service or anything else listening on a private address. Only global
// unicast addresses are reached, as ipaddr.js classifies them, unless the operator allows others
// (AGENT_BRIDGE_CALLBACK_ALLOW): checked at registration for an address written in the URL (and
// for `localhost` names) and at every attempt for the address a name resolves to. The gateway's
// egress proxy holds a sandboxed run's names to the same rule.

/** An address range: `10.0.0.0/8`, `::1/128`, or one address (a range of one). */
export interface Cidr {
  address: string;
  prefix: number;
  family: "ipv4" | "ipv6";
}

/** ipaddr.js's range names, in words, where its own name is not one. */
const WORDS: Record<string, string> = {
  linkLocal: "link-local",
  carrierGradeNat: "shared (CGNAT)",
  uniqueLocal: "private",
  deprecatedSiteLocal: "site-local",
  rfc6052: "NAT64",
  rfc6145: "IPv4-translated",
  teredo: "Teredo",
  as112: "AS112",
  as112v6: "AS112",
  amt: "AMT",
  deprecatedOrchid: "ORCHID",
  orchid2: "ORCHID",
  droneRemoteIdProtocolEntityTags: "drone remote ID",
  segmentRouting: "segment routing",
};
const words = (range: string) => WORDS[range] ?? range;

/** IPv6 global unicast; ipaddr.js calls `unicast` whatever is in none of its special ranges. */
const GLOBAL_UNICAST = ipaddr.IPv6.parseCIDR("2000::/3");
/** NAT64's well-known prefix; its local-use 64:ff9b:1::/48 puts the IPv4 address where the network chose. */
const NAT64_WELL_KNOWN = ipaddr.IPv6.parseCIDR("64:ff9b::/96");
/** IPv4-compatible addresses (`::a.b.c.d`, deprecated); `::` and `::1` have ranges of their own. */
const IPV4_COMPATIBLE = ipaddr.IPv6.parseCIDR("::/96");

/**
 * The IPv4 addresses an IPv6 address carries, and the way it carries them (none for IPv4-mapped:
 * the socket then connects to the IPv4 address itself); undefined when it carries none.
 */
function carried(
  ip: ipaddr.IPv6,
  range: string,
): { via: string | undefined; addresses: ipaddr.IPv4[] } | undefined {
  const bytes = ip.toByteArray();
  const at = (offset: number, flip = 0) =>
    new ipaddr.IPv4(bytes.slice(offset, offset + 4).map((b) => b ^ flip));
  if (range === "ipv4Mapped") return { via: undefined, addresses: [at(12)] };
  if (range === "rfc6145" || (range === "rfc6052" && ip.match(NAT64_WELL_KNOWN))) {
    return { via: words(range), addresses: [at(12)] };
  }
  if (range === "6to4") return { via: "6to4", addresses: [at(2)] };
  // The Teredo server, and the client, whose address is written with its bits inverted.
  if (range === "teredo") return { via: "Teredo", addresses: [at(4), at(12, 0xff)] };
  if (range === "unicast" && ip.match(IPV4_COMPATIBLE)) {
    return { via: "IPv4-compatible", addresses: [at(12)] };
  }
  return undefined;
}

/**
 * An IP address, as ipaddr.js reads it. IPv6 is first written in hex by the URL parser: libuv
 * prints an IPv4-compatible address as `::a.b.c.d`, which ipaddr.js would read as IPv4-mapped.
 * A zone (`%eth0`) says nothing of the range and the URL parser refuses it, so it is dropped.
 */
function parseAddress(address: string): ipaddr.IPv4 | ipaddr.IPv6 {
  if (isIP(address) !== 6) return ipaddr.parse(address);
  const { hostname } = new URL(`http://[${address.replace(/%.*$/, "")}]`);
  return ipaddr.parse(hostname.slice(1, -1));
}

/** `localhost` and the names under it, which always mean loopback (RFC 6761). */
const LOCALHOST = /(^|\.)localhost\.?$/;

/** Resolves a name to all its addresses, as `dns.lookup` with `all` does. */
export type Resolve = (
  hostname: string,
  options: LookupAllOptions,
  callback: (err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void,
) => void;

/** A name resolved to an address a callback may not reach. */
export class BlockedAddressError extends Error {
  readonly code = "EBLOCKEDADDRESS";
  constructor(readonly why: string) {
    super(`the callback's address is ${why}`);
  }
}

export class CallbackTargets {
  private readonly allowed = new BlockList();

  /** `resolve` is the system's resolver; tests answer with addresses of their choosing. */
  constructor(
    allow: readonly Cidr[],
    private readonly resolve: Resolve = dnsLookup,
  ) {
    for (const { address, prefix, family } of allow)
      this.allowed.addSubnet(address, prefix, family);
  }

  /**
   * Why a callback may not go to this IP address (`loopback`, `reserved`, `loopback via NAT64`…),
   * or undefined: it is global unicast, or carries only global unicast IPv4 addresses, or is
   * allowed.
   */
  blocked(address: string): string | undefined {
    const family = isIP(address) === 4 ? "ipv4" : "ipv6";
    if (this.allowed.check(address, family)) return undefined;
    const ip = parseAddress(address);
    const range = ip.range();
    if (ip instanceof ipaddr.IPv4) return range === "unicast" ? undefined : words(range);
    const carrier = carried(ip, range);
    if (carrier) {
      const why = carrier.addresses.map((a) => this.blocked(a.toString())).find(Boolean);
      return why && carrier.via ? `${why} via ${carrier.via}` : why;
    }
    if (range !== "unicast") return words(range);
    return ip.match(GLOBAL_UNICAST) ? undefined : "outside 2000::/3";
  }

  /**
   * Why a callback_url is refused when a hook is registered: credentials in it, an address
   * written in it that may not be reached, or a `localhost` name. Another name is not resolved here: what it
   * resolves to now says nothing about what it resolves to at an attempt, so `lookup` checks it
   * then.
   */
  urlRefusal(url: string): string | undefined {
    const parsed = new URL(url);
    if (parsed.username || parsed.password) {
      return "must not hold user:pass@ credentials: the receiver checks the signature made with callback_secret";
    }
    if (LOCALHOST.test(parsed.hostname) && (this.blocked("127.0.0.1") || this.blocked("::1"))) {
      return `${parsed.hostname} names loopback, which callbacks may not reach unless AGENT_BRIDGE_CALLBACK_ALLOW lists 127.0.0.1 and ::1`;
    }
    const host = literalAddress(parsed);
    const why = host && this.blocked(host);
    if (why) {
      return `${host} is not a global unicast address (${why}): callbacks may not reach it unless AGENT_BRIDGE_CALLBACK_ALLOW lists it`;
    }
    return undefined;
  }

  /**
   * A DNS lookup for the socket of an attempt that fails when the name resolves to any address
   * that may not be reached: the socket connects to the very addresses checked here, so a name cannot answer
   * "outside" to a check and "inside" to the connect (DNS rebinding).
   */
  readonly lookup: LookupFunction = (hostname, options, callback) => {
    this.resolve(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, "", 0);
      const why = addresses.map((a) => this.blocked(a.address)).find(Boolean);
      if (why) return callback(new BlockedAddressError(why), "", 0);
      const [first] = addresses;
      if (options.all || !first) return callback(null, addresses);
      return callback(null, first.address, first.family);
    });
  };
}

/** The IP address a URL names directly (no DNS), without IPv6's brackets; else undefined. */
export function literalAddress(url: URL): string | undefined {
  const host = url.hostname.replace(/^\[(.*)\]$/, "$1");
  return isIP(host) ? host : undefined;
}
