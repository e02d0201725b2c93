import { existsSync, readFileSync, realpathSync } from "node:fs";
import { createRequire } from "node:module";
import { isIP } from "node:net";
import { hostname } from "node:os";
import path from "node:path";
import { z } from "zod";
import { AGENT_NAMES, type AgentName, type SessionSettings } from "./agents/agent.js";
import { childEnvironment } from "./agents/child-env.js";
import {
  type AnthropicUpstream,
  anthropicUpstream,
  withoutUpstream,
} from "./agents/claude/credentials.js";
import {
  type CodexUpstream,
  codexUpstream,
  DEFAULT_CODEX_BASE_URL,
  withoutCodexUpstream,
} from "./agents/codex/credentials.js";
import { type McpCatalog, parseMcpConfig } from "./agents/mcp-servers.js";
import { PERMISSION_MODES } from "./agents/permission-modes.js";
import { EFFORTS } from "./agents/settings.js";
import { isWellFormedKey } from "./auth/keys.js";
import { MAX_VALUE_CHARS } from "./hooks/template.js";
import type { LogLevel } from "./log.js";
import { DEFAULT_PRICES, type PriceTable } from "./prices.js";
import type { LimitsConfig } from "./process/run-limits.js";
import { SANDBOX_MODES } from "./process/sandbox-modes.js";
import type { DatabaseTarget } from "./store/db.js";

// The one reader of process.env. Everything the service can be told from outside is listed here,
// parsed once at start-up; a bad value stops the process with one line per problem.

const bool = z
  .enum(["true", "false", "1", "0", "yes", "no"], { error: "expected true or false" })
  .transform((v) => v === "true" || v === "1" || v === "yes");

const int = (min: number, max = Number.MAX_SAFE_INTEGER) =>
  z.coerce
    .number({ error: "expected a whole number" })
    .int({ error: "expected a whole number" })
    .min(min, { error: `expected a whole number >= ${min}` })
    .max(max, { error: `expected a whole number <= ${max}` });

const list = z.string().transform((v) =>
  v
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean),
);

/** USD per million tokens. */
const usdRate = z.number().nonnegative();

/** JSON: prices by model name, each in `entry`'s shape (`shape` says it in the error). */
const priceTable = <T extends z.ZodType>(entry: T, shape: string) =>
  z
    .string()
    .transform((v, ctx) => {
      try {
        return JSON.parse(v) as unknown;
      } catch {
        ctx.addIssue({ code: "custom", message: "expected JSON" });
        return z.NEVER;
      }
    })
    .pipe(z.record(z.string().min(1), entry, { error: `expected ${shape} per million tokens` }));

/** An address range: `10.0.0.0/8`, `::1/128`, or one address (a range of one). */
export interface Cidr {
  address: string;
  prefix: number;
  family: "ipv4" | "ipv6";
}

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

const httpUrl = z.url({ protocol: /^https?$/, error: "expected an http:// or https:// URL" });

const oneOf = <T extends readonly [string, ...string[]]>(values: T) =>
  z.enum(values, { error: `expected one of: ${values.join(", ")}` });

const EnvSchema = z.object({
  PORT: int(0, 65535).default(8787),
  HOST: z.string().min(1).default("127.0.0.1"),
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, { error: "expected a postgres:// or postgresql:// URL" })
    .optional(),
  /** Connections each instance may open to Postgres, besides the one it LISTENs on. */
  AGENT_BRIDGE_DB_POOL_SIZE: int(2, 1000).default(10),
  LOG_LEVEL: oneOf(["debug", "info", "warn", "error"] as const).default("info"),
  AGENT_BRIDGE_DATA_DIR: z.string().min(1).default("./.agent-bridge"),
  AGENT_BRIDGE_BODY_LIMIT_BYTES: int(1024).default(1_048_576),
  AGENT_BRIDGE_DELIVERY_LIMIT_BYTES: int(1024).default(25 * 1024 * 1024),
  AGENT_BRIDGE_MAX_CONCURRENT_RUNS: int(1).default(4),
  AGENT_BRIDGE_MAX_QUEUED_RUNS: int(0).default(32),
  AGENT_BRIDGE_SHUTDOWN_GRACE_SECONDS: int(0).default(30),
  AGENT_BRIDGE_DB_OUTAGE_SECONDS: int(1).default(30),
  AGENT_BRIDGE_LEASE_SECONDS: int(2).default(20),
  AGENT_BRIDGE_LEASE_RENEW_SECONDS: int(1).default(5),
  AGENT_BRIDGE_HOST_ID: z.string().min(1).max(255).optional(),
  AGENT_BRIDGE_FOLLOW: oneOf(["notify", "poll"] as const).default("notify"),
  AGENT_BRIDGE_FOLLOW_POLL_MS: int(50).default(500),
  AGENT_BRIDGE_SSE_KEEPALIVE_SECONDS: int(1).default(15),
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
  AGENT_BRIDGE_ALLOWED_ROOTS: list.optional(),
  AGENT_BRIDGE_RATE_LIMIT_PER_MINUTE: int(1).default(600),
  AGENT_BRIDGE_MAX_RUNS_PER_KEY: int(1).default(8),
  AGENT_BRIDGE_CORS_ORIGINS: list.default([]),
  AGENT_BRIDGE_SESSION_TTL_SECONDS: int(1).default(259_200),
  AGENT_BRIDGE_SESSION_SWEEP_INTERVAL_SECONDS: int(1).default(300),
  AGENT_BRIDGE_CALLBACK_MAX_ATTEMPTS: int(1, 100).default(10),
  AGENT_BRIDGE_CALLBACK_BACKOFF_MIN_MS: int(10).default(2000),
  AGENT_BRIDGE_CALLBACK_BACKOFF_MAX_MS: int(10).default(600_000),
  AGENT_BRIDGE_CALLBACK_TIMEOUT_MS: int(100).default(10_000),
  AGENT_BRIDGE_CALLBACK_POLL_MS: int(50).default(1000),
  AGENT_BRIDGE_CALLBACK_ALLOW: cidrs.default([]),
  AGENT_BRIDGE_HOOK_PROMPT_MAX_BYTES: int(MAX_VALUE_CHARS).default(256 * 1024),
  AGENT_BRIDGE_SCHEDULE_TICK_MS: int(100).default(1000),
  AGENT_BRIDGE_AGENT: oneOf(AGENT_NAMES).default("claude"),
  AGENT_BRIDGE_AGENTS: list.optional(),
  AGENT_BRIDGE_CLAUDE_BIN: z.string().min(1).optional(),
  AGENT_BRIDGE_CODEX_BIN: z.string().min(1).optional(),
  AGENT_BRIDGE_CODEX_ENV_ALLOW: list.default([]),
  // Where the model gateway forwards codex's calls (an OpenAI base URL, `…/v1`); else codex's own
  // OPENAI_BASE_URL, else OpenAI's.
  AGENT_BRIDGE_CODEX_BASE_URL: httpUrl.optional(),
  OPENAI_BASE_URL: httpUrl.optional(),
  // Superseded by AGENT_BRIDGE_MODEL_PRICES, still read: its entries are in the same table.
  AGENT_BRIDGE_CODEX_PRICES: priceTable(
    z.strictObject({ input: usdRate, cached_input: usdRate, output: usdRate }),
    '{"<model>": {"input": USD, "cached_input": USD, "output": USD}}',
  ).default({}),
  AGENT_BRIDGE_MODEL_PRICES: priceTable(
    z.strictObject({
      input: usdRate,
      output: usdRate,
      cache_read: usdRate,
      cache_creation: usdRate,
    }),
    '{"<model>": {"input": USD, "output": USD, "cache_read": USD, "cache_creation": USD}}',
  ).default({}),
  AGENT_BRIDGE_WORK_DIR: z.string().min(1).default("."),
  AGENT_BRIDGE_PERMISSION_MODE: oneOf(PERMISSION_MODES).default("acceptEdits"),
  AGENT_BRIDGE_RUN_TIMEOUT_SECONDS: int(1).default(600),
  AGENT_BRIDGE_IDLE_TIMEOUT_SECONDS: int(1).default(300),
  AGENT_BRIDGE_APPROVAL_TIMEOUT_SECONDS: int(1).default(600),
  AGENT_BRIDGE_WORKTREE_ENABLED: bool.default(false),
  AGENT_BRIDGE_EFFORT: oneOf(EFFORTS).default("xhigh"),
  AGENT_BRIDGE_MAX_LINE_BYTES: int(10_000_000).default(16 * 1024 * 1024),
  AGENT_BRIDGE_MCP_CONFIG: z.string().min(1).optional(),
  AGENT_BRIDGE_CLAUDE_MODEL: z.string().min(1).optional(),
  AGENT_BRIDGE_CLAUDE_ENV_ALLOW: list.default([]),
  // The Claude CLI's own: where its API is (the gateway's upstream, src/gateway/).
  ANTHROPIC_BASE_URL: httpUrl.optional(),
  AGENT_BRIDGE_CODEX_MODEL: z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$/, "expected a model slug such as gpt-5.5")
    .optional(),
  // Per-key limits (issue 14).
  AGENT_BRIDGE_MAX_STREAMS_PER_KEY: int(1).default(32),
  AGENT_BRIDGE_AGENT_USER: z.string().min(1).optional(),
  AGENT_BRIDGE_AGENT_HOMES_DIR: z.string().min(1).optional(),
  AGENT_BRIDGE_TENANT_GID_BASE: int(1000, 4_000_000_000).default(2_000_000_000),
  // Above the ranges systemd and /etc/subuid hand out, below 2^31 (some tools take ids as signed).
  AGENT_BRIDGE_TENANT_UID_BASE: int(1000, 4_000_000_000).default(2_100_000_000),
  AGENT_BRIDGE_MAX_TENANTS: int(1, 2_147_483_647).default(1_000_000),
  AGENT_BRIDGE_DEBUG_CAPTURE: z.string().min(1).optional(),
  AGENT_BRIDGE_SANDBOX: oneOf(SANDBOX_MODES).default("auto"),
  AGENT_BRIDGE_SANDBOX_TMP_MB: int(1, 1_048_576).default(512),
  AGENT_BRIDGE_RUN_MEMORY_MB: int(0, 1_048_576).default(4096),
  AGENT_BRIDGE_RUN_MAX_PROCESSES: int(0, 4_194_304).default(1024),
  // OpenTelemetry's own variables: these decide whether traces are on; the exporter reads the
  // rest of its settings (OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, …) itself, as every SDK does.
  OTEL_EXPORTER_OTLP_ENDPOINT: httpUrl.optional(),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: httpUrl.optional(),
  OTEL_SDK_DISABLED: bool.optional(),
});

/**
 * Settings that hold secrets. Each can instead be read from a file named by `<NAME>_FILE` (the
 * Docker-secrets convention), so that no secret need be in the process's environment at all.
 */
const SECRET_SETTINGS = [
  "DATABASE_URL",
  "AGENT_BRIDGE_API_KEY",
  "ANTHROPIC_API_KEY",
  "ANTHROPIC_AUTH_TOKEN",
  "CLAUDE_CODE_OAUTH_TOKEN",
  "OPENAI_API_KEY",
] as const;

export interface Config {
  port: number;
  host: string;
  /** Unset: the embedded PGlite database under `dataDir`. */
  databaseUrl: string | undefined;
  databasePoolSize: number;
  dataDir: string;
  logLevel: LogLevel;
  bodyLimitBytes: number;
  auth: {
    /** "none" only on a loopback address. */
    mode: "keys" | "none";
    /** A key made an admin key at start-up (containers, CI). */
    apiKey: string | undefined;
    /** Whether /openapi.json is served without a key (/docs needs it). */
    publicOpenApi: boolean;
    /** Whether /metrics is served without a key (else it needs an admin key). */
    publicMetrics: boolean;
    requestsPerMinute: number;
  };
  /** Real paths a session's work_dir must lie in. */
  allowedRoots: string[];
  corsOrigins: string[];
  runs: {
    maxConcurrent: number;
    /** Runs (running and queued) one key may have at once. */
    maxPerKey: number;
    maxQueued: number;
    /** How long running runs may go on after SIGTERM before they are stopped. */
    shutdownGraceMs: number;
    /** How long a run waits for an unreachable database before it fails (nothing is lost before). */
    dbOutageBoundMs: number;
    keepAliveMs: number;
  };
  /**
   * This instance's lease on the database (src/cluster/lease.ts), and the host it says it runs
   * on: the machine whose disk holds the worktrees it makes.
   */
  lease: { leaseMs: number; renewMs: number; host: string };
  /**
   * How a run's followers and owner on other instances learn of new events and commands:
   * Postgres LISTEN/NOTIFY, or polling every `pollMs` where LISTEN does not work (src/cluster/).
   */
  follow: { mode: "notify" | "poll"; pollMs: number };
  sessions: {
    /** Idle time after which the sweep expires a session (and removes its worktree). */
    ttlMs: number;
    sweepIntervalMs: number;
  };
  hooks: {
    /** Largest webhook delivery body (GitHub sends up to 25 MB), apart from the API's limit. */
    deliveryLimitBytes: number;
    /** Largest rendered prompt (and system prompt, and session key) of a hook's run, in UTF-8 bytes. */
    promptMaxBytes: number;
    callback: {
      /** Tries of one callback, the first included, before it is `failed`. */
      maxAttempts: number;
      /** The wait after the first failure; it doubles each time, up to `backoffMaxMs`, jittered. */
      backoffMinMs: number;
      backoffMaxMs: number;
      /** One try that has no answer by then has failed. */
      timeoutMs: number;
      /** How often the outbox looks for due callbacks (a completion also wakes it). */
      pollMs: number;
      /** Inside addresses (loopback, private…) a callback may reach all the same. */
      allow: Cidr[];
    };
    /** How often the scheduler looks for due ticks. */
    scheduleTickMs: number;
  };
  /** Event streams (SSE) one key may have open at once. */
  streamsPerKey: number;
  /** Old names of settings that were set (each line says the new name), for the start-up log. */
  deprecated: string[];
  /** The directory agents work in, unless a session names another. */
  workDir: string;
  agents: {
    /** The back-end of a session that names none. */
    default: AgentName;
    /** The back-ends this server runs (the default among them). */
    enabled: AgentName[];
    /** Defaults of a session's settings, for every agent. */
    permissionMode: (typeof PERMISSION_MODES)[number];
    effort: (typeof EFFORTS)[number];
    worktreeEnabled: boolean;
    /** Limits of every run. */
    timeoutSeconds: number;
    idleTimeoutSeconds: number;
    /** How long a permission request waits for an answer (`approvals: "api"`). */
    approvalTimeoutSeconds: number;
    maxLineBytes: number;
    /** The MCP servers a session may name (AGENT_BRIDGE_MCP_CONFIG); empty when unset. */
    mcpServers: McpCatalog;
  };
  /**
   * USD per million tokens by model: the built-in table, with AGENT_BRIDGE_CODEX_PRICES and then
   * AGENT_BRIDGE_MODEL_PRICES over it (an entry replaces the model's).
   */
  prices: PriceTable;
  codex: {
    bin: string;
    /** The model of a codex session that names none; unset: codex's own default. */
    model: string | undefined;
    /** The environment codex runs with: an allow-list of this process's (OPENAI_*, CODEX_*). */
    childEnv: Record<string, string>;
    /**
     * Set when the operator gave codex's key in the environment: the API the model gateway
     * forwards codex's calls to, with that key. Unset (a `codex login`): codex calls its API itself.
     */
    upstream: CodexUpstream | undefined;
  };
  claude: {
    bin: string;
    /** The model of a claude session that names none; unset: the CLI's own default. */
    model: string | undefined;
    /**
     * The environment the CLI runs with: an allow-list of this process's, never its secrets, and,
     * with an upstream, none of the operator's credentials.
     */
    childEnv: Record<string, string>;
    /**
     * Set when the operator gave the CLI's credential in the environment: the API the model
     * gateway forwards the CLI's calls to, with that credential. Unset (a login in the CLI's HOME,
     * a cloud provider): the CLI calls its API itself.
     */
    upstream: AnthropicUpstream | undefined;
  };
  /** Set: every agent runs as this OS user (by name or uid), in a HOME of its tenant's. */
  agentUser:
    | {
        spec: string;
        /** Where each tenant's HOME is made (one directory per API key). */
        homesDir: string;
        /** Tenant n's agents run as this user id + n (0 when auth is off). */
        uidBase: number;
        /** …with this group id + n. */
        gidBase: number;
        /** The highest n the ranges hold (src/process/tenant-ids.ts). */
        maxTenants: number;
      }
    | undefined;
  /** Set: runs' spans go to this OTLP/HTTP traces endpoint (src/telemetry/). */
  tracing: { url: string } | undefined;
  /** Set: each run's raw CLI output and events are written here as JSONL (debugging only). */
  debugCaptureDir: string | undefined;
  /** Each run in a sandbox of its own (src/process/sandbox.ts). */
  sandbox: {
    mode: (typeof SANDBOX_MODES)[number];
    /** Size of each run's private /tmp and /dev/shm. */
    tmpBytes: number;
    /** Each sandboxed run's memory and process limits; 0: none (src/process/run-limits.ts). */
    limits: LimitsConfig;
    /** Where bubblewrap is looked for: the server's PATH. */
    searchPath: string;
    /**
     * What is the server's and no run may see: its data dir, the agents' homes, the debug
     * capture, the files its secrets and MCP servers were read from, its HOME.
     */
    hidden: string[];
  };
}

/** A session's default model on `agent` (none for an agent this version does not know). */
export function defaultModel(config: Config, agent: string): string | undefined {
  return (AGENT_NAMES as readonly string[]).includes(agent)
    ? config[agent as AgentName].model
    : undefined;
}

/** A session's settings: those given (undefined or null: not given), the server's defaults for the rest. */
export function settingsWithDefaults(
  config: Config,
  agent: string,
  given: { [K in keyof SessionSettings]?: SessionSettings[K] | null | undefined },
): SessionSettings {
  const { agents } = config;
  return {
    permissionMode: given.permissionMode ?? agents.permissionMode,
    effort: given.effort ?? agents.effort,
    model: given.model ?? defaultModel(config, agent) ?? null,
    systemPrompt: given.systemPrompt ?? null,
    worktree: given.worktree ?? agents.worktreeEnabled,
    mcpServers: given.mcpServers ?? [],
    maxTurns: given.maxTurns ?? null,
    maxBudgetUsd: given.maxBudgetUsd ?? null,
    approvals: given.approvals ?? "deny",
  };
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  ${p}`).join("\n")}`);
  }
}

/** The `claude` shipped in the installed @anthropic-ai/claude-code package, else the one on PATH. */
export function defaultClaudeBin(): string {
  return installedBin("@anthropic-ai/claude-code", "claude");
}

/** The `codex` shipped in the installed @openai/codex package, else the one on PATH. */
export function defaultCodexBin(): string {
  return installedBin("@openai/codex", "codex");
}

/** The binary `name` of the installed npm package `pkgName`, else `name` (looked up on PATH). */
function installedBin(pkgName: string, name: string): string {
  try {
    const require = createRequire(import.meta.url);
    const pkgPath = require.resolve(`${pkgName}/package.json`);
    const pkg = require(pkgPath) as { bin?: Record<string, string> };
    const rel = pkg.bin?.[name];
    if (rel) {
      const bin = path.join(path.dirname(pkgPath), rel);
      if (existsSync(bin)) return bin;
    }
  } catch {
    // not installed: fall through to PATH
  }
  return name;
}

/** Whether an address to bind only takes connections from this machine. */
export function isLoopback(host: string): boolean {
  return (
    host === "localhost" || host === "::1" || host === "[::1]" || /^127(\.\d{1,3}){3}$/.test(host)
  );
}

/** Roots are compared as real paths (symlinks followed); one that does not exist yet stays as given. */
function realPathOrSelf(p: string): string {
  try {
    return realpathSync(path.resolve(p));
  } catch {
    return path.resolve(p);
  }
}

/**
 * `env` with each `<NAME>_FILE` of a secret setting replaced by `<NAME>` and the file's content,
 * and the files read.
 */
function readSecretFiles(env: Record<string, string>): {
  env: Record<string, string>;
  files: string[];
} {
  const out = { ...env };
  const files: string[] = [];
  const problems: string[] = [];
  for (const name of SECRET_SETTINGS) {
    const file = out[`${name}_FILE`];
    if (file === undefined) continue;
    delete out[`${name}_FILE`];
    if (out[name] !== undefined) {
      problems.push(`${name}_FILE: set either ${name} or ${name}_FILE, not both`);
      continue;
    }
    let value: string;
    try {
      // A file written by `echo` or an editor ends in a newline that is not part of the secret.
      value = readFileSync(file, "utf8").replace(/\r?\n$/, "");
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
      problems.push(`${name}_FILE: cannot read ${JSON.stringify(file)} (${code})`);
      continue;
    }
    if (value === "") problems.push(`${name}_FILE: ${JSON.stringify(file)} is empty`);
    else out[name] = value;
    files.push(path.resolve(file));
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return { env: out, files };
}

/** The MCP servers of the admin's file; a file that cannot be read or used stops the start-up. */
function readMcpConfig(file: string | undefined): McpCatalog {
  if (file === undefined) return {};
  const where = `AGENT_BRIDGE_MCP_CONFIG: ${JSON.stringify(file)}`;
  let content: string;
  try {
    content = readFileSync(file, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    throw new ConfigError([`${where}: cannot read it (${code})`]);
  }
  const parsed = parseMcpConfig(content);
  if ("problems" in parsed) throw new ConfigError(parsed.problems.map((p) => `${where}: ${p}`));
  return parsed.catalog;
}

/**
 * Settings of every agent that had Claude's name before there was a second agent: the old name
 * still works (start-up logs that it is deprecated), but not together with the new one.
 */
const RENAMED = {
  AGENT_BRIDGE_CLAUDE_WORK_DIR: "AGENT_BRIDGE_WORK_DIR",
  AGENT_BRIDGE_CLAUDE_PERMISSION_MODE: "AGENT_BRIDGE_PERMISSION_MODE",
  AGENT_BRIDGE_CLAUDE_TIMEOUT_SECONDS: "AGENT_BRIDGE_RUN_TIMEOUT_SECONDS",
  AGENT_BRIDGE_CLAUDE_IDLE_TIMEOUT_SECONDS: "AGENT_BRIDGE_IDLE_TIMEOUT_SECONDS",
  AGENT_BRIDGE_CLAUDE_WORKTREE_ENABLED: "AGENT_BRIDGE_WORKTREE_ENABLED",
  AGENT_BRIDGE_CLAUDE_EFFORT: "AGENT_BRIDGE_EFFORT",
  AGENT_BRIDGE_CLAUDE_MAX_LINE_BYTES: "AGENT_BRIDGE_MAX_LINE_BYTES",
} as const;

/** `env` with each old name of a renamed setting moved to its new name. */
function renameDeprecated(env: Record<string, string>): {
  env: Record<string, string>;
  deprecated: string[];
  /** New name -> the old one it was set as, so that a problem names what the operator wrote. */
  setAs: Record<string, string>;
} {
  const out = { ...env };
  const deprecated: string[] = [];
  const setAs: Record<string, string> = {};
  const problems: string[] = [];
  for (const [old, name] of Object.entries(RENAMED)) {
    if (out[old] === undefined) continue;
    if (out[name] !== undefined) problems.push(`${old}: set ${name} (its new name), not both`);
    else {
      out[name] = out[old];
      setAs[name] = old;
      deprecated.push(`${old} is deprecated: it applies to every agent now, as ${name}`);
    }
    delete out[old];
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return { env: out, deprecated, setAs };
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // An empty variable means "not set", as in most shells' `VAR= cmd` idiom.
  const secrets = readSecretFiles(
    Object.fromEntries(
      Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined && e[1] !== ""),
    ),
  );
  const { env: present, deprecated, setAs } = renameDeprecated(secrets.env);
  const parsed = EnvSchema.safeParse(present);
  if (!parsed.success) {
    throw new ConfigError(
      parsed.error.issues.map((i) => {
        const name = String(i.path[0]);
        // A secret's value is not repeated: the line may end up in a log.
        const got = (SECRET_SETTINGS as readonly string[]).includes(name)
          ? ""
          : ` (got ${JSON.stringify(present[name])})`;
        return `${[setAs[name] ?? name, ...i.path.slice(1)].join(".")}: ${i.message}${got}`;
      }),
    );
  }
  const e = parsed.data;
  if (e.AGENT_BRIDGE_AUTH === "none" && !isLoopback(e.HOST)) {
    throw new ConfigError([
      `AGENT_BRIDGE_AUTH: "none" is only allowed on a loopback address, and HOST is ${JSON.stringify(e.HOST)} (use 127.0.0.1, ::1 or localhost, or keep auth on)`,
    ]);
  }
  if (e.AGENT_BRIDGE_CALLBACK_BACKOFF_MIN_MS > e.AGENT_BRIDGE_CALLBACK_BACKOFF_MAX_MS) {
    throw new ConfigError([
      `AGENT_BRIDGE_CALLBACK_BACKOFF_MIN_MS: must not exceed AGENT_BRIDGE_CALLBACK_BACKOFF_MAX_MS (${e.AGENT_BRIDGE_CALLBACK_BACKOFF_MAX_MS}) (got ${e.AGENT_BRIDGE_CALLBACK_BACKOFF_MIN_MS})`,
    ]);
  }
  if (e.AGENT_BRIDGE_LEASE_RENEW_SECONDS >= e.AGENT_BRIDGE_LEASE_SECONDS) {
    throw new ConfigError([
      `AGENT_BRIDGE_LEASE_RENEW_SECONDS: must be less than AGENT_BRIDGE_LEASE_SECONDS (${e.AGENT_BRIDGE_LEASE_SECONDS}), or a lease expires between renewals (got ${e.AGENT_BRIDGE_LEASE_RENEW_SECONDS})`,
    ]);
  }
  const enabledAgents = e.AGENT_BRIDGE_AGENTS ?? [e.AGENT_BRIDGE_AGENT];
  const unknownAgents = enabledAgents.filter(
    (a) => !(AGENT_NAMES as readonly string[]).includes(a),
  );
  if (unknownAgents.length > 0 || !enabledAgents.includes(e.AGENT_BRIDGE_AGENT)) {
    throw new ConfigError([
      `AGENT_BRIDGE_AGENTS: a comma-separated list of ${AGENT_NAMES.join(", ")} that includes AGENT_BRIDGE_AGENT (${e.AGENT_BRIDGE_AGENT}) (got ${JSON.stringify(enabledAgents.join(","))})`,
    ]);
  }
  const workDir = path.resolve(e.AGENT_BRIDGE_WORK_DIR);
  const dataDir = path.resolve(e.AGENT_BRIDGE_DATA_DIR);
  const claudeEnv = childEnvironment(present, e.AGENT_BRIDGE_CLAUDE_ENV_ALLOW);
  const claudeUpstream = anthropicUpstream(present);
  const codexEnv = childEnvironment(present, e.AGENT_BRIDGE_CODEX_ENV_ALLOW, "codex");
  const codexApi = codexUpstream(
    present,
    e.AGENT_BRIDGE_CODEX_BASE_URL ?? e.OPENAI_BASE_URL ?? DEFAULT_CODEX_BASE_URL,
  );
  const homesDir = e.AGENT_BRIDGE_AGENT_USER
    ? path.resolve(e.AGENT_BRIDGE_AGENT_HOMES_DIR ?? path.join(dataDir, "homes"))
    : undefined;
  const debugCaptureDir =
    e.AGENT_BRIDGE_DEBUG_CAPTURE && path.resolve(e.AGENT_BRIDGE_DEBUG_CAPTURE);
  return {
    port: e.PORT,
    host: e.HOST,
    databaseUrl: e.DATABASE_URL,
    databasePoolSize: e.AGENT_BRIDGE_DB_POOL_SIZE,
    dataDir,
    logLevel: e.LOG_LEVEL,
    bodyLimitBytes: e.AGENT_BRIDGE_BODY_LIMIT_BYTES,
    auth: {
      mode: e.AGENT_BRIDGE_AUTH,
      apiKey: e.AGENT_BRIDGE_API_KEY,
      publicOpenApi: e.AGENT_BRIDGE_PUBLIC_OPENAPI,
      publicMetrics: e.AGENT_BRIDGE_PUBLIC_METRICS,
      requestsPerMinute: e.AGENT_BRIDGE_RATE_LIMIT_PER_MINUTE,
    },
    allowedRoots: (e.AGENT_BRIDGE_ALLOWED_ROOTS ?? [workDir]).map((root) => realPathOrSelf(root)),
    corsOrigins: e.AGENT_BRIDGE_CORS_ORIGINS,
    runs: {
      maxPerKey: e.AGENT_BRIDGE_MAX_RUNS_PER_KEY,
      maxConcurrent: e.AGENT_BRIDGE_MAX_CONCURRENT_RUNS,
      maxQueued: e.AGENT_BRIDGE_MAX_QUEUED_RUNS,
      shutdownGraceMs: e.AGENT_BRIDGE_SHUTDOWN_GRACE_SECONDS * 1000,
      dbOutageBoundMs: e.AGENT_BRIDGE_DB_OUTAGE_SECONDS * 1000,
      keepAliveMs: e.AGENT_BRIDGE_SSE_KEEPALIVE_SECONDS * 1000,
    },
    lease: {
      leaseMs: e.AGENT_BRIDGE_LEASE_SECONDS * 1000,
      renewMs: e.AGENT_BRIDGE_LEASE_RENEW_SECONDS * 1000,
      host: e.AGENT_BRIDGE_HOST_ID ?? hostname(),
    },
    follow: { mode: e.AGENT_BRIDGE_FOLLOW, pollMs: e.AGENT_BRIDGE_FOLLOW_POLL_MS },
    sessions: {
      ttlMs: e.AGENT_BRIDGE_SESSION_TTL_SECONDS * 1000,
      sweepIntervalMs: e.AGENT_BRIDGE_SESSION_SWEEP_INTERVAL_SECONDS * 1000,
    },
    hooks: {
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
    },
    streamsPerKey: e.AGENT_BRIDGE_MAX_STREAMS_PER_KEY,
    deprecated,
    workDir,
    agents: {
      default: e.AGENT_BRIDGE_AGENT,
      enabled: enabledAgents as AgentName[],
      permissionMode: e.AGENT_BRIDGE_PERMISSION_MODE,
      effort: e.AGENT_BRIDGE_EFFORT,
      worktreeEnabled: e.AGENT_BRIDGE_WORKTREE_ENABLED,
      timeoutSeconds: e.AGENT_BRIDGE_RUN_TIMEOUT_SECONDS,
      idleTimeoutSeconds: e.AGENT_BRIDGE_IDLE_TIMEOUT_SECONDS,
      approvalTimeoutSeconds: e.AGENT_BRIDGE_APPROVAL_TIMEOUT_SECONDS,
      maxLineBytes: e.AGENT_BRIDGE_MAX_LINE_BYTES,
      mcpServers: readMcpConfig(e.AGENT_BRIDGE_MCP_CONFIG),
    },
    prices: {
      ...DEFAULT_PRICES,
      ...Object.fromEntries(
        Object.entries(e.AGENT_BRIDGE_CODEX_PRICES).map(([model, p]) => [
          model,
          // Its form has no rate for cache writes: they cost what input does.
          { input: p.input, output: p.output, cache_read: p.cached_input, cache_creation: p.input },
        ]),
      ),
      ...e.AGENT_BRIDGE_MODEL_PRICES,
    },
    codex: {
      bin: e.AGENT_BRIDGE_CODEX_BIN ?? defaultCodexBin(),
      model: e.AGENT_BRIDGE_CODEX_MODEL,
      childEnv: codexApi ? withoutCodexUpstream(codexEnv) : codexEnv,
      upstream: codexApi,
    },
    claude: {
      bin: e.AGENT_BRIDGE_CLAUDE_BIN ?? defaultClaudeBin(),
      model: e.AGENT_BRIDGE_CLAUDE_MODEL,
      childEnv: claudeUpstream ? withoutUpstream(claudeEnv) : claudeEnv,
      upstream: claudeUpstream,
    },
    agentUser:
      e.AGENT_BRIDGE_AGENT_USER && homesDir
        ? {
            spec: e.AGENT_BRIDGE_AGENT_USER,
            homesDir,
            uidBase: e.AGENT_BRIDGE_TENANT_UID_BASE,
            gidBase: e.AGENT_BRIDGE_TENANT_GID_BASE,
            maxTenants: e.AGENT_BRIDGE_MAX_TENANTS,
          }
        : undefined,
    tracing: tracesUrl(e),
    debugCaptureDir,
    sandbox: {
      mode: e.AGENT_BRIDGE_SANDBOX,
      tmpBytes: e.AGENT_BRIDGE_SANDBOX_TMP_MB * 1024 * 1024,
      limits: {
        memoryBytes: e.AGENT_BRIDGE_RUN_MEMORY_MB * 1024 * 1024,
        maxProcesses: e.AGENT_BRIDGE_RUN_MAX_PROCESSES,
      },
      searchPath: present.PATH ?? "/usr/local/bin:/usr/bin:/bin",
      hidden: [
        dataDir,
        ...(homesDir ? [homesDir] : []),
        ...(debugCaptureDir ? [debugCaptureDir] : []),
        ...(e.AGENT_BRIDGE_MCP_CONFIG ? [path.resolve(e.AGENT_BRIDGE_MCP_CONFIG)] : []),
        ...secrets.files,
        ...(present.HOME ? [path.resolve(present.HOME)] : []),
      ],
    },
  };
}

/**
 * Where spans go, as the OTLP exporter specification says: the traces endpoint as given, else
 * the general endpoint with `v1/traces` added; none (tracing off) when neither is set.
 */
function tracesUrl(e: z.infer<typeof EnvSchema>): Config["tracing"] {
  if (e.OTEL_SDK_DISABLED) return undefined;
  if (e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) return { url: e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT };
  const base = e.OTEL_EXPORTER_OTLP_ENDPOINT;
  if (!base) return undefined;
  return { url: `${base}${base.endsWith("/") ? "" : "/"}v1/traces` };
}

/** The database the configuration names: a Postgres server, else the embedded one. */
export function databaseTarget(config: Config): DatabaseTarget {
  return config.databaseUrl
    ? {
        kind: "postgres",
        url: config.databaseUrl,
        poolSize: config.databasePoolSize,
        outageBoundMs: config.runs.dbOutageBoundMs,
      }
    : { kind: "pglite", dataDir: config.dataDir };
}
