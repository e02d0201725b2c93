import { isIP } from "node:net";
import path from "node:path";
import type { z } from "zod";
import { int, list } from "../env-fields.js";
import type { HooksConfig } from "../hooks/hooks-config.js";
import { MAX_VALUE_CHARS } from "../hooks/template.js";
import type { Cidr } from "../net/targets.js";
import { ConfigError } from "./env.js";

// Incoming webhooks, schedules and outgoing callbacks.

function parseCidr(text: string): Cidr | undefined {
  const [address = "", prefixText, ...rest] = text.split("/");
  const version = isIP(address);
  if (version === 0 || rest.length > 0) return undefined;
  const bits = version === 4 ? 32 : 128;
  const prefix = prefixText === undefined ? bits : Number(prefixText);
  if (!/^\d{1,3}$/.test(prefixText ?? String(bits)) || prefix > bits) return undefined;
  return { address, prefix, family: version === 4 ? "ipv4" : "ipv6" };
}

const cidrs = list.transform((entries, ctx) => {
  const parsed: Cidr[] = [];
  for (const entry of entries) {
    const cidr = parseCidr(entry);
    if (cidr) parsed.push(cidr);
    else
      ctx.addIssue({
        code: "custom",
        message: `${JSON.stringify(entry)} is not a CIDR (expected e.g. 10.0.0.0/8, ::1/128)`,
      });
  }
  return parsed;
});

export const hooksEnv = {
  AGENT_BRIDGE_DELIVERY_LIMIT_BYTES: int(1024).default(25 * 1024 * 1024),
  AGENT_BRIDGE_CALLBACK_MAX_ATTEMPTS: int(1, 100).default(10),
  AGENT_BRIDGE_CALLBACK_BACKOFF_MIN_MS: int(10).default(2000),
  AGENT_BRIDGE_CALLBACK_BACKOFF_MAX_MS: int(10).default(600_000),
  AGENT_BRIDGE_CALLBACK_TIMEOUT_MS: int(100).default(10_000),
  AGENT_BRIDGE_CALLBACK_POLL_MS: int(50).default(1000),
  AGENT_BRIDGE_CALLBACK_ALLOW: cidrs.default([]),
  AGENT_BRIDGE_HOOK_PROMPT_MAX_BYTES: int(MAX_VALUE_CHARS).default(256 * 1024),
  AGENT_BRIDGE_SCHEDULE_TICK_MS: int(100).default(1000),
  AGENT_BRIDGE_REPLY_PROGRESS_MS: int(100).default(10_000),
  AGENT_BRIDGE_CHECKOUT_LOCAL_ORIGINS: list.default([]),
};

export function hooksSection(e: z.infer<z.ZodObject<typeof hooksEnv>>): HooksConfig {
  if (e.AGENT_BRIDGE_CALLBACK_BACKOFF_MIN_MS > e.AGENT_BRIDGE_CALLBACK_BACKOFF_MAX_MS) {
    throw new ConfigError([
      `AGENT_BRIDGE_CALLBACK_BACKOFF_MIN_MS: must not exceed AGENT_BRIDGE_CALLBACK_BACKOFF_MAX_MS (${e.AGENT_BRIDGE_CALLBACK_BACKOFF_MAX_MS}) (got ${e.AGENT_BRIDGE_CALLBACK_BACKOFF_MIN_MS})`,
    ]);
  }
  return {
    deliveryLimitBytes: e.AGENT_BRIDGE_DELIVERY_LIMIT_BYTES,
    promptMaxBytes: e.AGENT_BRIDGE_HOOK_PROMPT_MAX_BYTES,
    callback: {
      maxAttempts: e.AGENT_BRIDGE_CALLBACK_MAX_ATTEMPTS,
      backoffMinMs: e.AGENT_BRIDGE_CALLBACK_BACKOFF_MIN_MS,
      backoffMaxMs: e.AGENT_BRIDGE_CALLBACK_BACKOFF_MAX_MS,
      timeoutMs: e.AGENT_BRIDGE_CALLBACK_TIMEOUT_MS,
      pollMs: e.AGENT_BRIDGE_CALLBACK_POLL_MS,
      allow: e.AGENT_BRIDGE_CALLBACK_ALLOW,
    },
    scheduleTickMs: e.AGENT_BRIDGE_SCHEDULE_TICK_MS,
    replyProgressMs: e.AGENT_BRIDGE_REPLY_PROGRESS_MS,
    checkoutLocalOrigins: e.AGENT_BRIDGE_CHECKOUT_LOCAL_ORIGINS.map((dir) => path.resolve(dir)),
  };
}
