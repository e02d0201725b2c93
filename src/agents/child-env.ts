import { PROXY_VARIABLES } from "../process/proxy-variables.js";

// An agent child's environment: what its CLI needs to run and reach its API, nothing of the
// bridge's own configuration or secrets, nor another agent's credentials. Pure: the config layer
// calls it with process.env and the agent's policy (its plugin's).

const EXACT = new Set([
  "PATH",
  "HOME",
  "USER",
  "LOGNAME",
  "SHELL",
  "TMPDIR",
  "LANG",
  "LANGUAGE",
  "TZ",
  "TERM",
  "HTTP_PROXY",
  "HTTPS_PROXY",
  "NO_PROXY",
  "ALL_PROXY",
  "http_proxy",
  "https_proxy",
  "no_proxy",
  "all_proxy",
  "NODE_EXTRA_CA_CERTS",
  // As root the CLI refuses bypass permission modes unless it is told it runs in a sandbox.
  "IS_SANDBOX",
]);

const PREFIXES = ["LC_", "SSL_CERT_"];

/**
 * An agent's share of the environment (its plugin says it): the prefixes of its CLI's variables
 * (its credentials and its own settings), and prefixes that pass only while one of its switches is
 * on. Cloud credentials are host secrets that every Bash command of the agent could read, so they
 * pass only once the operator has switched the CLI to that provider; the operator can still pass
 * them explicitly through `extraAllow`.
 */
export interface EnvPolicy {
  prefixes: readonly string[];
  switched: ReadonlyArray<{ switch: string; prefixes: readonly string[] }>;
}

/** No agent's variables: what the server's own tools run for agents get (git, file work). */
export const NO_AGENT: EnvPolicy = { prefixes: [], switched: [] };

/** Never passed, whatever the allow-list says: the bridge's own settings and its database. */
function isDenied(name: string): boolean {
  return name === "DATABASE_URL" || name.startsWith("AGENT_BRIDGE_");
}

function isOn(value: string | undefined): boolean {
  if (value === undefined) return false;
  const v = value.trim().toLowerCase();
  return v !== "" && v !== "0" && v !== "false" && v !== "no" && v !== "off";
}

/**
 * Filters `source` down to the allow-list. `extraAllow` adds names; an entry ending in `*`
 * (e.g. `MY_TOOL_*`) adds every name with that prefix.
 */
export function childEnvironment(
  source: NodeJS.ProcessEnv,
  extraAllow: readonly string[],
  policy: EnvPolicy,
): Record<string, string> {
  const exact = new Set(EXACT);
  const prefixes: string[] = [...PREFIXES, ...policy.prefixes];
  for (const { switch: name, prefixes: extra } of policy.switched) {
    if (isOn(source[name])) prefixes.push(...extra);
  }
  for (const entry of extraAllow) {
    const name = entry.trim();
    if (name.endsWith("*")) {
      if (name.length > 1) prefixes.push(name.slice(0, -1));
    } else if (name.length > 0) {
      exact.add(name);
    }
  }
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(source)) {
    if (value === undefined || isDenied(name)) continue;
    if (exact.has(name) || prefixes.some((p) => name.startsWith(p))) env[name] = value;
  }
  return env;
}

/**
 * `env` with `host` among the hosts reached without a proxy, when it sets one: the CLI's proxy is
 * for the internet, and the CLI would send its calls to the bridge's gateway on loopback through
 * it too (Claude Code 2.1.328 does).
 */
export function bypassProxyFor(env: Record<string, string>, host: string): Record<string, string> {
  if (!PROXY_VARIABLES.some((name) => env[name])) return env;
  const out = { ...env };
  for (const name of ["NO_PROXY", "no_proxy"]) {
    out[name] = [out[name], host].filter(Boolean).join(",");
  }
  return out;
}
