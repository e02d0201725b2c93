import { z } from "@hono/zod-openapi";
import { PERMISSION_MODES } from "./permission-modes.js";
import type { ToolRuleEntry } from "./tool-rules.js";

// A session's settings, for every agent: one enum each so that config, the sessions and hooks APIs
// and key policies accept the same ones. Their names are Claude Code's, where they came from; each
// back-end maps them onto its CLI and refuses what it cannot honour (agents/agent.ts). A leaf, so
// that the store, auth and hooks read them without depending on the agents.

export const PermissionMode = z.enum(PERMISSION_MODES).openapi("PermissionMode");
export type PermissionMode = z.infer<typeof PermissionMode>;

export const EFFORTS = ["low", "medium", "high", "xhigh", "max"] as const;
export const Effort = z.enum(EFFORTS).openapi("Effort");
export type Effort = z.infer<typeof Effort>;

export const APPROVAL_MODES = ["deny", "api"] as const;
export const Approvals = z.enum(APPROVAL_MODES).openapi("Approvals", {
  description:
    "Who answers the agent's permission requests (a tool the permission mode does not allow, a question to the user): `deny`, the bridge refuses each at once (unattended runs) and says so in the stream; `api`, each waits for an answer at `POST /v1/runs/{id}/permissions/{request_id}` until `approval_timeout_seconds`. Claude Code only; `api` is a 400 for a codex session (codex exec asks for no approvals).",
});
export type Approvals = z.infer<typeof Approvals>;

/** A model name or alias, as the CLIs take them (a name that cannot be read as a flag). */
export const ModelName = z
  .string()
  .min(1)
  .max(200)
  .regex(/^[A-Za-z0-9._:\-[\]/]+$/, { error: "expected a model name or alias, e.g. sonnet" });

/** Most tool rules a session may list, allowed or disallowed. */
export const MAX_TOOL_RULES = 128;
/** Most extra directories a session may name. */
export const MAX_ADD_DIRS = 16;

/**
 * A tool rule as Claude Code takes them (`--allowedTools`, `--disallowedTools`): a tool's name,
 * optionally with what it applies to in parentheses (`Bash(npm test:*)`, `Read(./src/**)`,
 * `mcp__github__get_issue`). Passed as `--flag=rule`, so it cannot be read as a flag anyway; the
 * name must also hold no space or comma, which the CLI reads as separators.
 */
export const ToolRule = z
  .string()
  .min(1)
  .max(512)
  .regex(/^[A-Za-z][A-Za-z0-9_.-]*(\([^\p{Cc}]*\))?$/u, {
    error:
      "expected a tool rule: a tool's name, optionally with its rule in parentheses, e.g. Bash(npm test:*)",
  });

/**
 * A session's settings, the same fields for every back-end (each back-end maps them onto its CLI,
 * see `AgentBackend.settings`).
 */
export const SessionSettings = z.object({
  permissionMode: PermissionMode,
  effort: Effort,
  model: z.string().nullable(),
  systemPrompt: z.string().nullable(),
  worktree: z.boolean(),
  /** Names of the admin's MCP servers (AGENT_BRIDGE_MCP_CONFIG) the runs get, and no others. */
  mcpServers: z.array(z.string()),
  /** Caps of the run: agentic turns, and USD of its own (apart from its key's budget); null: none. */
  maxTurns: z.number().int().nullable(),
  maxBudgetUsd: z.number().nullable(),
  /** Who answers the agent's permission requests (RunContext.approve). */
  approvals: Approvals,
  /** Tool rules the agent may never use (Claude Code's `--disallowedTools`). */
  disallowedTools: z.array(z.string()),
  /** Rules of its tool uses, in every permission mode (src/tool-rules.ts), after its key's. */
  toolRules: z.array(z.custom<ToolRuleEntry>()),
  /**
   * Real paths of directories the agent may use besides its work dir (Claude Code's `--add-dir`),
   * each inside the allowed roots, and writable in its sandbox as its work dir is.
   */
  addDirs: z.array(z.string()),
  /** Its agent may not end a turn with uncommitted changes unsaid (a Stop hook, Claude Code). */
  requireCleanWorkDir: z.boolean(),
});
export type SessionSettings = z.infer<typeof SessionSettings>;

/** The server's defaults of a session's settings (its `agents` configuration). */
export interface SettingsDefaults {
  agents: {
    /** The agent of a session that names none. */
    default: string;
    permissionMode: PermissionMode;
    effort: Effort;
    worktreeEnabled: boolean;
    /** The model of a session that names none, by agent; absent: the CLI's own default. */
    models: Readonly<Record<string, string | undefined>>;
  };
}

/** A session's settings: those given (undefined or null: not given), the server's defaults for the rest. */
export function settingsWithDefaults(
  config: SettingsDefaults,
  agent: string,
  given: { [K in keyof SessionSettings]?: SessionSettings[K] | null | undefined },
): SessionSettings {
  const { agents } = config;
  // An agent this version does not know has no default model.
  const model = Object.hasOwn(agents.models, agent) ? agents.models[agent] : undefined;
  return {
    permissionMode: given.permissionMode ?? agents.permissionMode,
    effort: given.effort ?? agents.effort,
    model: given.model ?? model ?? null,
    systemPrompt: given.systemPrompt ?? null,
    worktree: given.worktree ?? agents.worktreeEnabled,
    mcpServers: given.mcpServers ?? [],
    maxTurns: given.maxTurns ?? null,
    maxBudgetUsd: given.maxBudgetUsd ?? null,
    approvals: given.approvals ?? "deny",
    disallowedTools: given.disallowedTools ?? [],
    toolRules: given.toolRules ?? [],
    addDirs: given.addDirs ?? [],
    requireCleanWorkDir: given.requireCleanWorkDir ?? false,
  };
}
