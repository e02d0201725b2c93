import path from "node:path";
import type { Forge } from "../forges/delivery.js";

// The address a checkout hook fetches its pull requests' heads from: pinned in the hook by its
// admin, never read from a tenant's repository at fetch time, and of a kind whose fetch runs no
// command: `https://`, or a local path under a directory the operator named
// (AGENT_BRIDGE_CHECKOUT_LOCAL_ORIGINS). ssh, git://, http:// and the transports that run a
// command (`ext::`) are refused.

export const MAX_ORIGIN_CHARS = 2000;

/** Why `origin` cannot be a checkout hook's origin, or undefined when it can. */
export function originRefusal(origin: string, localRoots: readonly string[]): string | undefined {
  if (origin.length > MAX_ORIGIN_CHARS) return `longer than ${MAX_ORIGIN_CHARS} characters`;
  // Control characters (U+0000 included) and anything past ASCII have no place in a URL git gets.
  if (!/^[\x21-\x7e]+$/.test(origin)) return "holds a space, a control character or non-ASCII";
  if (origin.startsWith("/")) return localRefusal(origin, localRoots);
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return "expected an https:// URL or an absolute path";
  }
  if (url.protocol !== "https:") {
    return `expected an https:// URL (or an absolute path), not ${url.protocol}`;
  }
  if (url.username || url.password) {
    return "holds a user or password: give the hook a forge_token instead";
  }
  if (url.search || url.hash) return "holds a query or a fragment";
  return undefined;
}

function localRefusal(origin: string, localRoots: readonly string[]): string | undefined {
  if (path.normalize(origin) !== origin || origin.endsWith("/")) {
    return "a local origin is a normal absolute path (no `.`, `..`, `//` or trailing `/`)";
  }
  if (!localRoots.some((root) => origin.startsWith(root === "/" ? "/" : `${root}/`))) {
    return localRoots.length === 0
      ? "a local origin needs AGENT_BRIDGE_CHECKOUT_LOCAL_ORIGINS, which is empty: use an https:// URL"
      : `a local origin lies under AGENT_BRIDGE_CHECKOUT_LOCAL_ORIGINS (${localRoots.join(", ")})`;
  }
  return undefined;
}

/** Whether a pinned origin is a local path (fetched over git's `file` transport). */
export const isLocalOrigin = (origin: string) => origin.startsWith("/");

/**
 * The HTTP header that authenticates a fetch with a hook's forge token: Basic, with the user each
 * forge takes for a token (GitHub `x-access-token`, GitLab `oauth2`). Base64 keeps whatever the
 * token holds (a CR, an LF) inside the one header.
 */
export function tokenHeader(forge: Forge, token: string): string {
  const user = forge === "github" ? "x-access-token" : "oauth2";
  return `Authorization: Basic ${Buffer.from(`${user}:${token}`, "utf8").toString("base64")}`;
}

/**
 * Whether the hook's forge token may go with a fetch from `origin`: only to the forge it is for,
 * the host of its API (`gitlab.example.com`) or the one whose API that is (`github.com` for
 * `api.github.com`). An origin elsewhere (one the work dir's config named when the hook was made)
 * is fetched without it.
 */
export function tokenGoesTo(origin: string, apiUrl: string): boolean {
  if (isLocalOrigin(origin)) return false;
  try {
    const host = new URL(origin).hostname.toLowerCase();
    const api = new URL(apiUrl).hostname.toLowerCase();
    return host === api || api === `api.${host}`;
  } catch {
    return false;
  }
}
