import { z } from "@hono/zod-openapi";
import { MCP_SERVER_NAME } from "../../../agents/mcp-servers.js";
import { AgentName } from "../../../agents/registry.js";
import type { Config } from "../../../config.js";
import { SessionUsage } from "../../../events.js";
import {
  Approvals,
  Effort,
  MAX_ADD_DIRS,
  MAX_TOOL_RULES,
  ModelName,
  PermissionMode,
  ToolRule,
} from "../../../session-settings.js";
import type { SessionRow, WorktreeRow } from "../../../store/schema.js";
import { WORKTREE_STATES } from "../../../store/worktrees.js";
import { ToolRules as ToolUseRules } from "../../../tool-rules.js";

export const SessionId = z.uuid({ error: "expected a session id (a UUID)" }).openapi({
  param: { name: "id", in: "path" },
  example: "0b6a2f7e-3c1d-4a53-9d8e-2f1c6b7a9e10",
});

/** Caps of a run, on a session (each of its runs) or a message (its run). */
export const MAX_TURNS = 1000;
export const MAX_BUDGET_USD = 100_000;

export const MaxTurns = z
  .number()
  .int({ error: "expected a whole number of turns" })
  .min(1, { error: "expected at least 1 turn" })
  .max(MAX_TURNS, { error: `expected at most ${MAX_TURNS} turns` });

export const MaxBudgetUsd = z
  .number()
  .positive({ error: "expected a positive amount of USD" })
  .max(MAX_BUDGET_USD, { error: `expected at most ${MAX_BUDGET_USD} USD` });

export const MAX_TURNS_HELP =
  "The most agentic turns (model calls) a run may take; a run stopped by it ends `failed` with `error_code: max_turns`. Claude Code only (`--max-turns`); 400 for a codex session.";
export const MAX_BUDGET_HELP =
  "The most USD a run may spend; the agent stops after the turn that reaches it, and the run ends `failed` with `error_code: max_budget`. With a key's monthly budget the run gets the smaller of the two (stopped by the key's, it ends `budget_exhausted`). At the model gateway, a call of the run that would start past it is refused, whatever the agent; Claude Code also gets `--max-budget-usd`.";

export const McpServerNames = z
  .array(
    z.string().regex(MCP_SERVER_NAME, {
      error: "expected the name of an MCP server in the server's AGENT_BRIDGE_MCP_CONFIG",
    }),
  )
  .max(32, { error: "at most 32 MCP servers" })
  .refine((names) => new Set(names).size === names.length, {
    error: "each MCP server at most once",
  })
  .openapi({
    description:
      "MCP servers the agent gets, by the names the server's admin gave them in `AGENT_BRIDGE_MCP_CONFIG` (400 for a name it does not have). Each run gets exactly these: a work dir's own `.mcp.json` and any other MCP configuration are never loaded. Claude Code only; 400 for a codex session.",
    example: ["github"],
  });

export const ToolRules = z
  .array(ToolRule)
  .max(MAX_TOOL_RULES, { error: `at most ${MAX_TOOL_RULES} tool rules` });

export const REQUIRE_CLEAN_WORK_DIR_HELP =
  "When true, the agent may not end its turn with uncommitted changes in its work dir (or its worktree) unsaid: a Stop hook runs `git status --porcelain` there (as the session's tenant, in its sandbox) and sends the agent back with the changed files, asking it to commit them or say why they stay, at most twice a turn; each check is a `stop_check` event of the full view, and a run whose agent still stopped dirty says `work_dir_dirty: true` in its completion. A work dir that is no git repository is let stop. Default false; Claude Code only (a 400 for a codex session).";

export const DISALLOWED_TOOLS_HELP =
  "Tool rules the agent may never use, as Claude Code's `--disallowedTools` takes them (`WebFetch`, `Bash(curl:*)`): a tool named alone is not offered to the model at all. Claude Code only; 400 for a codex session.";

export const AddDirs = z
  .array(z.string().min(1).max(4096))
  .max(MAX_ADD_DIRS, { error: `at most ${MAX_ADD_DIRS} directories` })
  .openapi({
    description:
      "More directories the agent may use besides its work dir (Claude Code's `--add-dir`), absolute or relative to the first allowed root; each must resolve (symlinks followed) inside `AGENT_BRIDGE_ALLOWED_ROOTS` and the key's `work_roots`, as `work_dir` must, and is shown as its real path. In a sandboxed run each is writable as the work dir is. Claude Code only; 400 for a codex session.",
    example: ["/srv/repos/shared-lib"],
  });

export const CreateSessionBody = z
  .strictObject({
    title: z.string().min(1).max(200).optional().openapi({ description: "A label for people." }),
    agent: AgentName.optional().openapi({
      description:
        "The agent CLI the session's runs use, one of those the server runs (`GET /readyz` lists them). Default: the server's `AGENT_BRIDGE_AGENT`. The settings below apply to every agent; a value an agent has no equivalent for is refused (400) rather than ignored: see docs/agents.md.",
    }),
    permission_mode: PermissionMode.optional().openapi({
      description:
        "How the agent may use tools. Default: the server's `AGENT_BRIDGE_PERMISSION_MODE`.",
    }),
    model: ModelName.optional().openapi({
      description: "Model name or alias. Default: the CLI's (or `AGENT_BRIDGE_CLAUDE_MODEL`).",
    }),
    effort: Effort.optional().openapi({ description: "Default: `AGENT_BRIDGE_EFFORT`." }),
    system_prompt: z
      .string()
      .min(1)
      .max(100_000)
      .optional()
      .openapi({ description: "Appended to the CLI's system prompt on every run of the session." }),
    worktree: z.boolean().optional().openapi({
      description: "Run in a git worktree of its own. Default: `AGENT_BRIDGE_WORKTREE_ENABLED`.",
    }),
    mcp_servers: McpServerNames.optional(),
    max_turns: MaxTurns.optional().openapi({
      description: `${MAX_TURNS_HELP} A message may set its own for its run.`,
    }),
    max_budget_usd: MaxBudgetUsd.optional().openapi({
      description: `${MAX_BUDGET_HELP} A message may set its own for its run.`,
    }),
    approvals: Approvals.optional().openapi({
      description:
        "Who answers the agent's permission requests. Default `deny`; a message may set its own for its run.",
    }),
    approval_timeout_seconds: z
      .number()
      .int({ error: "expected a whole number of seconds" })
      .min(1, { error: "expected at least 1 second" })
      .max(86_400, { error: "expected at most 86400 seconds" })
      .optional()
      .openapi({
        description:
          "How long a permission request waits for an answer (`approvals: api`) before it is denied `by: timeout`. Default: `AGENT_BRIDGE_APPROVAL_TIMEOUT_SECONDS`. The run's wall-clock timeout keeps counting while a request waits; its idle timeout does not.",
      }),
    disallowed_tools: ToolRules.optional().openapi({ description: DISALLOWED_TOOLS_HELP }),
    tool_rules: ToolUseRules.optional(),
    add_dirs: AddDirs.optional(),
    require_clean_work_dir: z
      .boolean()
      .optional()
      .openapi({ description: REQUIRE_CLEAN_WORK_DIR_HELP }),
    work_dir: z.string().min(1).max(4096).optional().openapi({
      description:
        "Directory the agent works in, absolute or relative to the first allowed root; it must resolve (symlinks followed) inside `AGENT_BRIDGE_ALLOWED_ROOTS`. Default: `AGENT_BRIDGE_WORK_DIR`.",
    }),
    metadata: z
      .record(z.string().min(1).max(64), z.string().max(512))
      .refine((m) => Object.keys(m).length <= 32, { error: "at most 32 metadata keys" })
      .optional()
      .openapi({ description: "Up to 32 string pairs, stored and returned as given." }),
  })
  .openapi("CreateSession", {
    // A request a server with the default configuration accepts: without it, /docs builds its
    // sample from the fields (`"worktree": true`, `"mcp_servers": ["github"]`, …), which a
    // default server refuses.
    example: { title: "try it", permission_mode: "plan", effort: "high" },
  });

export const WorktreeInfo = z
  .object({
    path: z.string().openapi({ description: "The worktree's directory." }),
    branch: z.string().openapi({ example: "worktree-0b6a2f7e-3c1d-4a53-9d8e-2f1c6b7a9e10" }),
    base_commit: z
      .string()
      .nullable()
      .openapi({ description: "The commit of origin/HEAD the branch was made from." }),
    state: z.enum(WORKTREE_STATES).openapi({
      description:
        "`active`: in use; `removed`: worktree and branch removed (the session expired); `kept_dirty`: the session expired but the worktree had uncommitted changes, so it is still at `path`.",
    }),
    created_at: z.string().openapi({ format: "date-time" }),
    removed_at: z.string().nullable().openapi({ format: "date-time" }),
  })
  .openapi("Worktree");
export type WorktreeInfo = z.infer<typeof WorktreeInfo>;

export const ForkedFrom = z
  .object({
    session_id: z.string().openapi({ description: "The session it was forked from." }),
    run_id: z.string().openapi({ description: "The run of that session it branched after." }),
  })
  .openapi("ForkedFrom");

export const Session = z
  .object({
    id: z.string().openapi({ description: "Also the Claude Code CLI's session id." }),
    title: z.string().nullable(),
    agent: z.string().openapi({
      description:
        "The session's agent back-end (`AgentName`; a string, so that a session of a back-end this version does not know still reads).",
      example: "claude",
    }),
    agent_session_id: z.string().nullable().openapi({
      description:
        "The agent CLI's own session (Claude Code) or thread (Codex) id, once a run reported it.",
    }),
    permission_mode: PermissionMode,
    model: z.string().nullable().openapi({ description: "null: the CLI's default model." }),
    effort: Effort,
    system_prompt: z.string().nullable(),
    work_dir: z.string().openapi({ description: "The real path the agent works in." }),
    worktree: z.boolean(),
    mcp_servers: z.array(z.string()).openapi({ description: "The MCP servers its runs get." }),
    max_turns: z.number().int().nullable().openapi({
      description: "Each run's cap on turns, unless its message sets one; null: none.",
    }),
    max_budget_usd: z.number().nullable().openapi({
      description: "Each run's cap in USD, unless its message sets one; null: none.",
    }),
    approvals: Approvals,
    approval_timeout_seconds: z.number().int().openapi({
      description: "How long a permission request waits for an answer.",
    }),
    allowed_tools: z.array(z.string()).openapi({
      description:
        "Tool rules allowed for the rest of the session by answers with `scope: session`, given to each later run as `--allowedTools`.",
    }),
    disallowed_tools: z.array(z.string()).openapi({
      description: "Tool rules its runs may never use (`--disallowedTools`).",
    }),
    tool_rules: ToolUseRules,
    add_dirs: z.array(z.string()).openapi({
      description: "Real paths of the directories its runs may use besides the work dir.",
    }),
    require_clean_work_dir: z.boolean().openapi({ description: REQUIRE_CLEAN_WORK_DIR_HELP }),
    metadata: z.record(z.string(), z.string()),
    created_at: z.string().openapi({ format: "date-time" }),
    updated_at: z.string().openapi({ format: "date-time" }),
    last_activity_at: z.string().openapi({ format: "date-time" }),
    expired_at: z.string().nullable().openapi({
      format: "date-time",
      description:
        "When the session outlived `AGENT_BRIDGE_SESSION_TTL_SECONDS` of inactivity; an expired session can be read and deleted but takes no more messages (410).",
    }),
    git_worktree: WorktreeInfo.nullable().openapi({
      description:
        "The session's git worktree as found on disk after its last run; null until a run of a `worktree` session has made one.",
    }),
    forked_from: ForkedFrom.nullable().openapi({
      description:
        "Set on a session made by `POST /v1/sessions/{id}/fork`: the session and run it branched after.",
    }),
    active_run_id: z.string().nullable().openapi({
      description:
        "The session's queued or running run, if any: follow it at `/v1/runs/{active_run_id}/events`. Its other runs are at `/v1/sessions/{id}/runs`.",
    }),
    usage: SessionUsage,
  })
  .openapi("Session");
export type Session = z.infer<typeof Session>;

export const SessionPage = z
  .object({
    data: z.array(Session),
    next_cursor: z.string().nullable().openapi({ description: "null on the last page." }),
  })
  .openapi("SessionPage");

export const DeleteSessionQuery = z.strictObject({
  force: z
    .enum(["true", "false"], { error: "expected true or false" })
    .default("false")
    .openapi({
      param: { name: "force", in: "query" },
      description: "Remove the session's worktree even when it has uncommitted changes.",
    }),
});

function toWorktreeInfo(row: WorktreeRow): WorktreeInfo {
  return {
    path: row.path,
    branch: row.branch,
    base_commit: row.baseRef,
    state: z.enum(WORKTREE_STATES).parse(row.state),
    created_at: row.createdAt.toISOString(),
    removed_at: row.removedAt?.toISOString() ?? null,
  };
}

/** What a session is shown with besides its row. */
export interface SessionExtras {
  worktree?: WorktreeRow | undefined;
  activeRunId?: string | undefined;
}

export function toSession(
  row: SessionRow,
  config: Config,
  { worktree, activeRunId }: SessionExtras = {},
): Session {
  return {
    id: row.id,
    title: row.title,
    agent: row.agent,
    agent_session_id: row.agentSessionId,
    permission_mode: PermissionMode.parse(row.permissionMode),
    model: row.model,
    effort: Effort.parse(row.effort),
    system_prompt: row.systemPrompt,
    work_dir: row.workDir ?? config.workDir,
    worktree: row.worktree,
    mcp_servers: row.mcpServers,
    max_turns: row.maxTurns,
    max_budget_usd: row.maxBudgetUsd,
    approvals: Approvals.parse(row.approvals),
    approval_timeout_seconds: row.approvalTimeoutSeconds ?? config.agents.approvalTimeoutSeconds,
    allowed_tools: row.allowedTools,
    disallowed_tools: row.disallowedTools,
    tool_rules: row.toolRules,
    add_dirs: row.addDirs,
    require_clean_work_dir: row.requireCleanWorkDir,
    metadata: row.metadata,
    created_at: row.createdAt.toISOString(),
    updated_at: row.updatedAt.toISOString(),
    last_activity_at: row.lastActivityAt.toISOString(),
    expired_at: row.expiredAt?.toISOString() ?? null,
    git_worktree: worktree ? toWorktreeInfo(worktree) : null,
    forked_from: row.forkedFrom
      ? { session_id: row.forkedFrom.sessionId, run_id: row.forkedFrom.runId }
      : null,
    active_run_id: activeRunId ?? null,
    usage: {
      input_tokens: row.inputTokens,
      output_tokens: row.outputTokens,
      cache_read_tokens: row.cacheReadTokens,
      cache_creation_tokens: row.cacheCreationTokens,
      cost_usd: row.costUsd,
      num_turns: row.numTurns,
      runs: row.runs,
    },
  };
}
