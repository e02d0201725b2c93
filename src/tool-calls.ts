import { z } from "@hono/zod-openapi";

// Tool calls as data: what every agent back-end's tools come down to, so that a client shows a
// shell command, a file edit or a search the same way whichever agent ran it. A `tool_call`
// event carries the call (`NormalizedToolCall`), its `tool_update` the outcome (`ToolOutcome`).
// The CLI's own input stays on the `tool_call` as `input`; these are the parts a client needs.
// Strings here are bounded like a `tool_result`'s content: `truncated` says one was cut.

export const TOOL_KINDS = [
  "read_file",
  "modify_file",
  "shell_exec",
  "code_search",
  "http_request",
  "subagent_task",
  "create_task",
  "manage_todos",
  "generic",
] as const;
export const ToolKind = z.enum(TOOL_KINDS).openapi("ToolKind", {
  description:
    "What a tool call does, whichever agent made it: `read_file`, `modify_file` (edits, writes, patches), `shell_exec`, `code_search` (glob, grep), `http_request` (fetch, web search), `subagent_task`, `create_task`, `manage_todos`, `generic` (anything else, MCP tools included).",
});
export type ToolKind = z.infer<typeof ToolKind>;

const truncated = {
  truncated: z.boolean().optional().openapi({
    description: "True when a string of this payload was cut to the bound of a tool_result.",
  }),
};

export const FileChange = z
  .object({
    file_path: z.string(),
    operation: z.enum(["create", "write", "edit", "delete"]).openapi({
      description:
        "`create` a new file, `write` a whole file (new or not), `edit` part of one, `delete` it.",
    }),
    old_content: z.string().optional(),
    new_content: z.string().optional(),
    diff: z.string().optional().openapi({
      description:
        "Unified diff of old_content → new_content, when both are known and small enough to compare.",
    }),
  })
  .openapi("FileChange");
export type FileChange = z.infer<typeof FileChange>;

export const NormalizedToolCall = z
  .discriminatedUnion("kind", [
    z.object({
      kind: z.literal("read_file"),
      file_path: z.string(),
      offset: z.number().int().optional(),
      limit: z.number().int().optional(),
      ...truncated,
    }),
    z.object({ kind: z.literal("modify_file"), changes: z.array(FileChange), ...truncated }),
    z.object({
      kind: z.literal("shell_exec"),
      command: z.string(),
      description: z.string().optional(),
      timeout_ms: z.number().int().optional(),
      background: z.boolean(),
      ...truncated,
    }),
    z.object({
      kind: z.literal("code_search"),
      pattern: z.string().optional(),
      path: z.string().optional(),
      glob: z.string().optional(),
      ...truncated,
    }),
    z.object({
      kind: z.literal("http_request"),
      url: z.string().optional(),
      query: z.string().optional(),
      ...truncated,
    }),
    z.object({
      kind: z.literal("subagent_task"),
      description: z.string().optional(),
      prompt: z.string().optional(),
      subagent_type: z.string().optional(),
      ...truncated,
    }),
    z.object({
      kind: z.literal("create_task"),
      subject: z.string().optional(),
      description: z.string().optional(),
      ...truncated,
    }),
    z.object({
      kind: z.literal("manage_todos"),
      todos: z
        .array(
          z.object({
            content: z.string(),
            status: z.enum(["pending", "in_progress", "completed"]),
          }),
        )
        .optional()
        .openapi({ description: "The whole list, when the call sets it." }),
      task_id: z.string().optional(),
      status: z.string().optional(),
      ...truncated,
    }),
    z.object({ kind: z.literal("generic") }),
  ])
  .openapi("NormalizedToolCall");
export type NormalizedToolCall = z.infer<typeof NormalizedToolCall>;

export const ToolOutcome = z
  .discriminatedUnion("kind", [
    z.object({
      kind: z.literal("shell_exec"),
      exit_code: z.number().int().nullable().openapi({
        description: "The command's exit code; null when the agent did not report it.",
      }),
      stdout: z.string().optional(),
      stderr: z.string().optional(),
      output: z.string().optional().openapi({
        description: "stdout and stderr as one text, from agents that do not separate them.",
      }),
      interrupted: z.boolean().optional(),
      ...truncated,
    }),
    z.object({
      kind: z.literal("modify_file"),
      changes: z.array(FileChange).optional().openapi({
        description:
          "What the file held and holds now, with their unified diff, when the agent reports it (Claude Code's Write).",
      }),
      ...truncated,
    }),
    z.object({ kind: ToolKind.exclude(["shell_exec", "modify_file"]) }),
  ])
  .openapi("ToolOutcome");
export type ToolOutcome = z.infer<typeof ToolOutcome>;
