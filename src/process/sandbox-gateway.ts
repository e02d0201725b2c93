import { HTTP_PROXY_VARIABLES, NO_PROXY_VARIABLES } from "./proxy-variables.js";

// The network of a run whose CLI calls its model API through the bridge's gateway: a namespace of
// its own, with loopback alone. The run's Unix socket to the gateway is bound in, and socat,
// started inside before the CLI, serves it on the gateway's own port number at 127.0.0.1, so the
// CLI's base URL is the same inside as out. The agent's other connections go through the same
// port, which is also an HTTP proxy that lets through what the run's key allows
// (src/gateway/egress.ts): HTTP(S)_PROXY name it, with the run's token. The host's /run (its
// services' sockets: the database's, the container engine's) is hidden too (sandbox-mounts.ts). A
// CLI that reaches its API by itself (its own login, no gateway) keeps the host's network.

/** The model gateway as one run's sandbox reaches it (src/gateway/). */
export interface SandboxGateway {
  /** The run's token: the password of the gateway's proxy. */
  token: string;
  /** The run's own Unix socket to the gateway, bound into the sandbox. */
  socket: string;
  /** The gateway's port: the CLI's base URL names it, so it is served on it inside too. */
  port: number;
}

/** Where a sandbox finds the gateway's socket. */
export const GATEWAY_SOCKET = "/run/agent-bridge/gateway.sock";

/**
 * The variables that send the CLI's other connections through the gateway's proxy. Given to bwrap
 * in its environment, which it passes on, not in its arguments: any user on the host reads a
 * process's command line, only its own user its environment.
 */
export function gatewayProxyEnv(gateway: SandboxGateway): Record<string, string> {
  const env: Record<string, string> = {};
  const proxy = `http://run:${gateway.token}@127.0.0.1:${gateway.port}`;
  for (const name of HTTP_PROXY_VARIABLES) env[name] = proxy;
  for (const name of NO_PROXY_VARIABLES) env[name] = "127.0.0.1,localhost,::1";
  return env;
}

/**
 * `bin` started once socat serves the gateway's socket on `port` inside the sandbox (a CLI that
 * called before would find nothing there); socat dies with the sandbox.
 */
export function behindGateway(
  socat: string,
  port: number,
  bin: string,
  args: string[],
): [string, string[]] {
  // A listening socket on 127.0.0.1:port, as the namespace's /proc/net/tcp lists it: looked for
  // with the shell's builtins alone (no process per look), while socat starts.
  const listening = `0100007F:${port.toString(16).toUpperCase().padStart(4, "0")} 0A`;
  const script = [
    // SIGTERM left to the CLI: its grace after one may still call its API (socat dies with the
    // sandbox all the same).
    `(trap '' TERM; exec '${socat}' TCP-LISTEN:${port},bind=127.0.0.1,fork,reuseaddr UNIX-CONNECT:${GATEWAY_SOCKET}) &`,
    "listening() {",
    `  while read -r _ address _ state _; do [ "$address $state" = "${listening}" ] && return 0; done </proc/net/tcp`,
    "  return 1",
    "}",
    "until listening; do",
    `  kill -0 $! 2>/dev/null || { echo "agent-bridge: no way to the model gateway in the sandbox" >&2; exit 126; }`,
    "done",
    'exec "$@"',
  ].join("\n");
  return ["/bin/sh", ["-c", script, "sh", bin, ...args]];
}
