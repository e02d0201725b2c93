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
      work_dir: z.string().optional().openapi({
        description:
          "The directory the agent's shell runs its commands from: Claude Code's work dir, as its init line names it (a command that `cd`s into one of its subdirectories leaves the next commands there, which the CLI does not report). None from codex, whose items do not say.",
      }),
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
    z.object({
      kind: z.literal("read_file"),
      file_path: z.string().optional(),
      content: z.string().optional().openapi({
        description:
          "The text the agent read, without the line numbers the model was shown (Claude Code's Read of a text file).",
      }),
      start_line: z.number().int().optional().openapi({
        description: "The first line read, from 1 (the call's `offset`).",
      }),
      line_count: z.number().int().optional().openapi({
        description: "How many lines were read (at most the call's `limit`).",
      }),
      total_lines: z.number().int().optional().openapi({ description: "The file's lines." }),
      ...truncated,
    }),
    z.object({
      kind: z.literal("code_search"),
      files: z.array(z.string()).optional().openapi({
        description:
          "The files found (a Glob's, a Grep's in its default `files_with_matches` mode), as the agent named them; cut to the bound as a whole, with `truncated` (which is also set when the agent itself stopped listing: a Glob's first 100 files).",
      }),
      file_count: z.number().int().optional().openapi({
        description: "How many files the agent says it found.",
      }),
      match_count: z.number().int().optional().openapi({
        description: "How many matches (a Grep in `count` mode).",
      }),
      output: z.string().optional().openapi({
        description: "The matching lines or counts (a Grep in `content` or `count` mode).",
      }),
      ...truncated,
    }),
    z.object({
      kind: z.literal("http_request"),
      url: z.string().optional(),
      status_code: z.number().int().optional().openapi({
        description: "The HTTP status the fetched page came with (Claude Code's WebFetch).",
      }),
      status_text: z.string().optional(),
      response: z.string().optional().openapi({
        description:
          "What the tool gave the model: the page as the agent's small model summed it up (WebFetch), the search's results (WebSearch), or the error.",
      }),
      ...truncated,
    }),
    z.object({
      kind: z.literal("subagent_task"),
      status: z.string().optional().openapi({
        description:
          "The subagent's state as the agent reports it (`async_launched`: Claude Code runs it in the background).",
      }),
      agent_id: z.string().optional(),
      output: z.string().optional().openapi({ description: "The call's result text." }),
      ...truncated,
    }),
    z.object({
      kind: z.literal("create_task"),
      task_id: z.string().optional().openapi({ description: "The id of the task created." }),
      ...truncated,
    }),
    z.object({
      kind: z.literal("manage_todos"),
      tasks: z
        .array(z.object({ id: z.string(), subject: z.string(), status: z.string() }))
        .optional()
        .openapi({ description: "The task list, as a TaskList call returned it." }),
      ...truncated,
    }),
    z.object({
      kind: z.literal("generic"),
      output: z.string().optional().openapi({
        description: "The tool's result text (MCP tools included; other blocks named `[image]`…).",
      }),
      ...truncated,
    }),
  ])
  .openapi("ToolOutcome");
export type ToolOutcome = z.infer<typeof ToolOutcome>;
