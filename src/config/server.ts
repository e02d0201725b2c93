import { realpathSync } from "node:fs";
import path from "node:path";
import { z } from "zod";
import { int, list, oneOf } from "../env-fields.js";
import type { LogLevel } from "../log.js";

// Where the server listens, what it keeps where, and the bounds of its HTTP API.

export const serverEnv = {
  PORT: int(0, 65535).default(8787),
  HOST: z.string().min(1).default("127.0.0.1"),
  LOG_LEVEL: oneOf(["debug", "info", "warn", "error"] as const).default("info"),
  AGENT_BRIDGE_DATA_DIR: z.string().min(1).default("./.agent-bridge"),
  AGENT_BRIDGE_BODY_LIMIT_BYTES: int(1024).default(1_048_576),
  AGENT_BRIDGE_CORS_ORIGINS: list.default([]),
  // Per-key limits (issue 14).
  AGENT_BRIDGE_MAX_STREAMS_PER_KEY: int(1).default(32),
  AGENT_BRIDGE_WORK_DIR: z.string().min(1).default("."),
  AGENT_BRIDGE_ALLOWED_ROOTS: list.optional(),
};

export interface ServerConfig {
  port: number;
  host: string;
  dataDir: string;
  logLevel: LogLevel;
  bodyLimitBytes: number;
  corsOrigins: string[];
  /** Event streams (SSE) one key may have open at once. */
  streamsPerKey: number;
  /** The directory agents work in, unless a session names another. */
  workDir: string;
  /** Real paths a session's work_dir must lie in. */
  allowedRoots: string[];
}

export function serverSection(e: z.infer<z.ZodObject<typeof serverEnv>>): ServerConfig {
  const workDir = path.resolve(e.AGENT_BRIDGE_WORK_DIR);
  return {
    port: e.PORT,
    host: e.HOST,
    dataDir: path.resolve(e.AGENT_BRIDGE_DATA_DIR),
    logLevel: e.LOG_LEVEL,
    bodyLimitBytes: e.AGENT_BRIDGE_BODY_LIMIT_BYTES,
    corsOrigins: e.AGENT_BRIDGE_CORS_ORIGINS,
    streamsPerKey: e.AGENT_BRIDGE_MAX_STREAMS_PER_KEY,
    workDir,
    allowedRoots: (e.AGENT_BRIDGE_ALLOWED_ROOTS ?? [workDir]).map((root) => realPathOrSelf(root)),
  };
}

/** Roots are compared as real paths (symlinks followed); one that does not exist yet stays as given. */
function realPathOrSelf(p: string): string {
  try {
    return realpathSync(path.resolve(p));
  } catch {
    return path.resolve(p);
  }
}
