import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import { BlockList, isIP, type LookupFunction } from "node:net";
import type { Cidr } from "../config.js";

// Where a callback may go. A hook's callback_url is chosen by whoever registers the hook, and the
// bridge POSTs to it from inside the network: without this, a callback could reach the database,
// the cloud's metadata service or anything else listening on a private address. Addresses inside
// are refused unless the operator allows them (AGENT_BRIDGE_CALLBACK_ALLOW), at registration for
// an address written in the URL and at every attempt for the address a name resolves to.

/** The ranges a callback may not reach, by why. IPv4-mapped IPv6 addresses match the IPv4 ones. */
const INSIDE: Record<string, [string, number][]> = {
  unspecified: [
    ["0.0.0.0", 8],
    ["::", 128],
  ],
  loopback: [
    ["127.0.0.0", 8],
    ["::1", 128],
  ],
  private: [
    ["10.0.0.0", 8],
    ["172.16.0.0", 12],
    ["192.168.0.0", 16],
    ["fc00::", 7],
  ],
  "shared (CGNAT)": [["100.64.0.0", 10]],
  // 169.254.169.254 is the cloud metadata service.
  "link-local": [
    ["169.254.0.0", 16],
    ["fe80::", 10],
  ],
  multicast: [
    ["224.0.0.0", 4],
    ["ff00::", 8],
  ],
  "broadcast or reserved": [["240.0.0.0", 4]],
};

const insideRanges: [string, BlockList][] = Object.entries(INSIDE).map(([why, ranges]) => {
  const list = new BlockList();
  for (const [address, prefix] of ranges) {
    list.addSubnet(address, prefix, isIP(address) === 4 ? "ipv4" : "ipv6");
  }
  return [why, list];
});

/** A name resolved to an address a callback may not reach. */
export class BlockedAddressError extends Error {
  readonly code = "EBLOCKEDADDRESS";
  constructor(readonly why: string) {
    super(`the callback's address is ${why}`);
  }
}

export class CallbackTargets {
  private readonly allowed = new BlockList();

  constructor(allow: readonly Cidr[]) {
    for (const { address, prefix, family } of allow)
      this.allowed.addSubnet(address, prefix, family);
  }

  /** Why a callback may not go to this IP address (`loopback`, `private`…), or undefined. */
  blocked(address: string): string | undefined {
    const family = isIP(address) === 4 ? "ipv4" : "ipv6";
    if (this.allowed.check(address, family)) return undefined;
    return insideRanges.find(([, list]) => list.check(address, family))?.[0];
  }

  /**
   * Why a callback_url is refused when a hook is registered: credentials in it, or an address
   * inside written in it. A name is not resolved here: what it resolves to now says nothing about
   * what it resolves to at an attempt, so `lookup` checks it then.
   */
  urlRefusal(url: string): string | undefined {
    const parsed = new URL(url);
    if (parsed.username || parsed.password) {
      return "must not hold user:pass@ credentials: the receiver checks the signature made with callback_secret";
    }
    const host = literalAddress(parsed);
    const why = host && this.blocked(host);
    if (why) {
      return `${host} is an address inside (${why}), which callbacks may not reach unless AGENT_BRIDGE_CALLBACK_ALLOW lists it`;
    }
    return undefined;
  }

  /**
   * A DNS lookup for the socket of an attempt that fails when the name resolves to any address
   * inside: the socket connects to the very addresses checked here, so a name cannot answer
   * "outside" to a check and "inside" to the connect (DNS rebinding).
   */
  readonly lookup: LookupFunction = (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses: LookupAddress[]) => {
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
