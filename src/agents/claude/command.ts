import { InvalidRunRequestError } from "../../process/errors.js";
import type { Effort, PermissionMode } from "../../session-settings.js";
import type { ForkOf } from "../agent.js";
import type { ImageAttachment } from "../images.js";
import { forkArgs } from "./fork.js";

// The `claude` command line for one run, as an argument array (never a shell string). The prompt
// is not an argument at all: it goes in on stdin as a stream-json user message (see
// `userMessageLine`), so no prompt text can ever be read as an option.

export interface CommandInput {
  claudeSessionId: string;
  resume: boolean;
  /**
   * With `resume`: the message to continue the conversation from, leaving out what came after
   * it (a retry drops the turn that failed).
   */
  resumeAt?: string;
  /**
   * Without `resume`: the session starts as a fork of this conversation, cut after this message
   * (see fork.ts).
   */
  forkOf?: ForkOf;
  worktree?: string;
  permissionMode: PermissionMode;
  effort?: Effort;
  model?: string;
  appendSystemPrompt?: string;
  /** USD the run may spend; the CLI stops after the turn that reaches it. */
  maxBudgetUsd?: number;
  /** Agentic turns the run may take. */
  maxTurns?: number;
  /** A file of the MCP servers the run gets (`{"mcpServers": …}`); absent: none. */
  mcpConfigFile?: string;
  /** Tool rules allowed without asking (`Write`, `Bash(npm test:*)`): the session's. */
  allowedTools?: readonly string[];
  /** Tool rules the agent may never use: the session's (`--disallowedTools`). */
  disallowedTools?: readonly string[];
  /** Real paths of more directories the agent may use (`--add-dir`): the session's. */
  addDirs?: readonly string[];
  /** The JSON Schema of the answer (src/output-schema.ts): the CLI adds its StructuredOutput tool. */
  outputSchema?: Record<string, unknown>;
}

/**
 * Flags every run gets: one-shot print mode, stream-json both ways, permission prompts on stdio,
 * and an account of each user message the CLI takes (steering.ts counts the inputs it answered).
 */
export const BASE_ARGS: readonly string[] = [
  "-p",
  "--input-format",
  "stream-json",
  "--output-format",
  "stream-json",
  "--verbose",
  "--include-partial-messages",
  "--permission-prompt-tool",
  "stdio",
  "--replay-user-messages",
];

export function buildClaudeArgs(input: CommandInput): string[] {
  if (input.claudeSessionId.length === 0) {
    throw new InvalidRunRequestError("claudeSessionId is empty");
  }
  const args = [...BASE_ARGS];
  if (!input.resume && input.forkOf) args.push(...forkArgs(input.claudeSessionId, input.forkOf));
  else args.push(input.resume ? "--resume" : "--session-id", input.claudeSessionId);
  // A uuid the CLI reported, passed as `--flag=value` so that it can never be read as a flag.
  if (input.resume && input.resumeAt !== undefined)
    args.push(`--resume-session-at=${input.resumeAt}`);
  if (input.worktree !== undefined) {
    // `-w` takes an optional value, so a value starting with "-" would be read as the next flag.
    if (input.worktree.length === 0 || input.worktree.startsWith("-")) {
      throw new InvalidRunRequestError(`invalid worktree name: ${JSON.stringify(input.worktree)}`);
    }
    args.push("-w", input.worktree);
  }
  // The CLI (2.1.328) lists "manual" for the default mode in --help but still accepts "default",
  // and reports it back as "default" in its init line; so the enum value is passed as it is.
  if (input.permissionMode === "dangerously-skip-permissions") {
    args.push("--dangerously-skip-permissions");
  } else {
    args.push("--permission-mode", input.permissionMode);
  }
  if (input.effort !== undefined) args.push("--effort", input.effort);
  if (input.model) args.push("--model", input.model);
  if (input.appendSystemPrompt) args.push("--append-system-prompt", input.appendSystemPrompt);
  if (input.maxBudgetUsd !== undefined) {
    // In micro-dollars, never 0 (which the CLI would not take as a cap).
    const usd = Math.max(1, Math.round(input.maxBudgetUsd * 1e6)) / 1e6;
    args.push(`--max-budget-usd=${usd}`);
  }
  if (input.maxTurns !== undefined) args.push(`--max-turns=${input.maxTurns}`);
  // On the command line (it holds no secret, and is at most 64 KiB: one argument may take 128).
  if (input.outputSchema !== undefined) {
    args.push(`--json-schema=${JSON.stringify(input.outputSchema)}`);
  }
  // One rule per flag, with `=`: the option is variadic, and a rule may hold spaces.
  for (const rule of input.allowedTools ?? []) args.push(`--allowedTools=${rule}`);
  for (const rule of input.disallowedTools ?? []) args.push(`--disallowedTools=${rule}`);
  for (const dir of input.addDirs ?? []) {
    // Stored as absolute real paths; anything else is not one of the session's.
    if (!dir.startsWith("/"))
      throw new InvalidRunRequestError(`invalid add_dir: ${JSON.stringify(dir)}`);
    args.push(`--add-dir=${dir}`);
  }
  // A file, not the JSON itself: argv is readable by every process on the machine, and a server's
  // env or headers hold its secrets. `=` keeps the variadic option to this one value.
  if (input.mcpConfigFile !== undefined) args.push(`--mcp-config=${input.mcpConfigFile}`);
  // Always, with servers or without: no other MCP configuration (a work dir's .mcp.json, the
  // user's) is ever loaded unasked.
  args.push("--strict-mcp-config");
  return args;
}

/**
 * The prompt as the one stream-json user message written to the CLI's stdin (with `\n`); images
 * go first, as image content blocks, which the CLI passes on to the Messages API. With `uuid`, the
 * CLI names the message so in its account of it (steering.ts).
 */
export function userMessageLine(
  prompt: string,
  images: readonly ImageAttachment[] = [],
  uuid?: string,
): string {
  const content = [
    ...images.map((image) => ({
      type: "image",
      source: { type: "base64", media_type: image.mediaType, data: image.data },
    })),
    { type: "text", text: prompt },
  ];
  const message = {
    type: "user",
    message: { role: "user", content },
    parent_tool_use_id: null,
    session_id: "",
    ...(uuid === undefined ? {} : { uuid }),
  };
  return `${JSON.stringify(message)}\n`;
}
