import { type Command, InvalidArgumentError, Option } from "commander";
import type { UpdateSession } from "../client/index.js";
import { PERMISSION_MODES } from "../permission-modes.js";
import { APPROVAL_MODES, EFFORTS } from "../session-settings.js";
import { clientOf, positiveInt } from "./options.js";
import { printJson } from "./print.js";
import type { Output } from "./render.js";

// `sessions update` (PATCH /v1/sessions/{id}) and `sessions diff` (GET /v1/sessions/{id}/diff).

/** The fields `--clear` may set back to their defaults (null in the patch). */
const CLEARABLE = [
  "title",
  "metadata",
  "permission_mode",
  "model",
  "effort",
  "system_prompt",
  "mcp_servers",
  "max_turns",
  "max_budget_usd",
  "approvals",
  "approval_timeout_seconds",
  "allowed_tools",
  "disallowed_tools",
  "add_dirs",
] as const satisfies readonly (keyof UpdateSession)[];

const collect = (value: string, previous: string[] = []) => [...previous, value];

function pair(value: string, previous: Record<string, string> = {}): Record<string, string> {
  const at = value.indexOf("=");
  if (at <= 0) throw new InvalidArgumentError("expected key=value");
  return { ...previous, [value.slice(0, at)]: value.slice(at + 1) };
}

function usd(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError("expected a positive amount");
  return n;
}

interface UpdateOptions {
  title?: string;
  model?: string;
  effort?: UpdateSession["effort"];
  permissionMode?: UpdateSession["permission_mode"];
  approvals?: UpdateSession["approvals"];
  approvalTimeout?: number;
  maxTurns?: number;
  maxBudgetUsd?: number;
  systemPrompt?: string;
  mcpServer?: string[];
  allowedTool?: string[];
  disallowedTool?: string[];
  addDir?: string[];
  metadata?: Record<string, string>;
  clear?: (typeof CLEARABLE)[number][];
}

/** The patch the options ask for. */
export function patchOf(options: UpdateOptions): UpdateSession {
  const patch: UpdateSession = {};
  for (const field of options.clear ?? []) patch[field] = null;
  if (options.title !== undefined) patch.title = options.title;
  if (options.model !== undefined) patch.model = options.model;
  if (options.effort !== undefined) patch.effort = options.effort;
  if (options.permissionMode !== undefined) patch.permission_mode = options.permissionMode;
  if (options.approvals !== undefined) patch.approvals = options.approvals;
  if (options.approvalTimeout !== undefined) {
    patch.approval_timeout_seconds = options.approvalTimeout;
  }
  if (options.maxTurns !== undefined) patch.max_turns = options.maxTurns;
  if (options.maxBudgetUsd !== undefined) patch.max_budget_usd = options.maxBudgetUsd;
  if (options.systemPrompt !== undefined) patch.system_prompt = options.systemPrompt;
  if (options.mcpServer) patch.mcp_servers = options.mcpServer;
  if (options.allowedTool) patch.allowed_tools = options.allowedTool;
  if (options.disallowedTool) patch.disallowed_tools = options.disallowedTool;
  if (options.addDir) patch.add_dirs = options.addDir;
  if (options.metadata) patch.metadata = options.metadata;
  return patch;
}

export function addSessionSettingsCommands(sessions: Command, out: Output): void {
  sessions
    .command("update")
    .description(
      "change a session's settings; its next run takes them (a list option replaces the whole list)",
    )
    .argument("<id>", "session id")
    .option("--title <title>", "a label for people")
    .option("--model <model>", "the model its runs use")
    .addOption(new Option("--effort <effort>", "how hard its agent thinks").choices(EFFORTS))
    .addOption(
      new Option("--permission-mode <mode>", "what its agent may do without asking").choices(
        PERMISSION_MODES,
      ),
    )
    .addOption(
      new Option("--approvals <who>", "who answers permission requests").choices(APPROVAL_MODES),
    )
    .option("--approval-timeout <seconds>", "how long a request waits", positiveInt)
    .option("--max-turns <n>", "each run's cap on turns", positiveInt)
    .option("--max-budget-usd <usd>", "each run's cap on spend", usd)
    .option("--system-prompt <text>", "appended to the CLI's system prompt")
    .option("--mcp-server <name>", "an MCP server its runs get (repeat for more)", collect)
    .option("--allowed-tool <rule>", "a tool rule allowed without asking (repeat)", collect)
    .option("--disallowed-tool <rule>", "a tool rule never allowed (repeat)", collect)
    .option("--add-dir <dir>", "another directory its agent may use (repeat)", collect)
    .option("--metadata <key=value>", "metadata, replacing all of it (repeat)", pair)
    .addOption(
      new Option(
        "--clear <field>",
        `set a field back to its default (repeat): ${CLEARABLE.join(", ")}`,
      ).argParser((value: string, previous: string[] = []) => {
        if (!(CLEARABLE as readonly string[]).includes(value)) {
          throw new InvalidArgumentError(`expected one of ${CLEARABLE.join(", ")}`);
        }
        return [...previous, value];
      }),
    )
    .option("--json", "print the session as JSON (default: its id)")
    .action(async (id: string, options: UpdateOptions & { json?: boolean }, command: Command) => {
      const session = await clientOf(command).updateSession(id, patchOf(options));
      if (options.json) printJson(out, session);
      else out.stdout.write(`${session.id}\n`);
    });
  sessions
    .command("diff")
    .description("print what the agent changed in a worktree session's worktree, as a unified diff")
    .argument("<id>", "session id")
    .option("--json", "print the file list and the diff as JSON")
    .action(async (id: string, options: { json?: boolean }, command: Command) => {
      const client = clientOf(command);
      if (options.json) printJson(out, await client.sessionDiff(id));
      else out.stdout.write(await client.sessionDiffText(id));
    });
}
