import { z } from "zod";
import type { AuthConfig } from "../auth/bootstrap.js";
import { isWellFormedKey } from "../auth/keys.js";
import { bool, int, oneOf } from "../env-fields.js";
import { ConfigError } from "./env.js";

// Who may call the API: keys (or none, on loopback only), and how often.

export const authEnv = {
  AGENT_BRIDGE_AUTH: oneOf(["keys", "none"] as const).default("keys"),
  AGENT_BRIDGE_API_KEY: z
    .string()
    .refine(isWellFormedKey, {
      error:
        "expected ab_ and 43 base64url characters, e.g. from `agent-bridge keys create` or `node -e \"console.log('ab_'+crypto.randomBytes(32).toString('base64url'))\"`",
    })
    .optional(),
  AGENT_BRIDGE_PUBLIC_OPENAPI: bool.default(true),
  AGENT_BRIDGE_PUBLIC_METRICS: bool.default(false),
  AGENT_BRIDGE_RATE_LIMIT_PER_MINUTE: int(1).default(600),
};

/** Whether an address to bind only takes connections from this machine. */
function isLoopback(host: string): boolean {
  return (
    host === "localhost" || host === "::1" || host === "[::1]" || /^127(\.\d{1,3}){3}$/.test(host)
  );
}

export function authSection(
  e: z.infer<z.ZodObject<typeof authEnv>>,
  server: { host: string },
): AuthConfig {
  if (e.AGENT_BRIDGE_AUTH === "none" && !isLoopback(server.host)) {
    throw new ConfigError([
      `AGENT_BRIDGE_AUTH: "none" is only allowed on a loopback address, and HOST is ${JSON.stringify(server.host)} (use 127.0.0.1, ::1 or localhost, or keep auth on)`,
    ]);
  }
  return {
    mode: e.AGENT_BRIDGE_AUTH,
    apiKey: e.AGENT_BRIDGE_API_KEY,
    publicOpenApi: e.AGENT_BRIDGE_PUBLIC_OPENAPI,
    publicMetrics: e.AGENT_BRIDGE_PUBLIC_METRICS,
    requestsPerMinute: e.AGENT_BRIDGE_RATE_LIMIT_PER_MINUTE,
  };
}
