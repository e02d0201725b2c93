import type { AgentIdentity } from "../../process/tenant-homes.js";
import type { RunToolRules } from "../../tool-rules.js";
import type { Git } from "../../worktrees/git.js";
import type { ImageAttachment } from "../images.js";
import type { CommandInput } from "./command.js";

/** One message to the CLI: the command's options, plus the prompt (stdin) and where to run. */
export interface RunRequest extends Omit<CommandInput, "mcpConfigFile"> {
  prompt: string;
  /** Images sent with the prompt. */
  attachments?: readonly ImageAttachment[];
  /** The `--mcp-config` JSON of the run's MCP servers; absent: none. */
  mcpConfig?: string;
  /** `maxBudgetUsd` is the run's own cap, not what its key's budget has left. */
  ownBudget?: boolean;
  cwd: string;
  /** Set: the CLI runs as its tenant's user, in its tenant's HOME (src/process/tenant-homes.ts). */
  identity?: AgentIdentity;
  /** The rules of its tool uses, enforced by a PreToolUse hook (hooks.ts); absent: none. */
  toolRules?: RunToolRules;
  /** Set: the session's `require_clean_work_dir`, checked with this git (stop-check.ts). */
  cleanWorkDir?: Git;
}
