// What the bridge says about a tool: the coarse `kind` of a tool_call event and the status line.

export type ToolKind =
  | "bash"
  | "edit"
  | "read"
  | "search"
  | "web"
  | "task"
  | "todo"
  | "question"
  | "plan"
  | "mcp"
  | "other";

const KINDS: Record<string, ToolKind> = {
  Bash: "bash",
  BashOutput: "bash",
  KillShell: "bash",
  KillBash: "bash",
  PowerShell: "bash",
  Edit: "edit",
  MultiEdit: "edit",
  Write: "edit",
  NotebookEdit: "edit",
  Read: "read",
  NotebookRead: "read",
  Glob: "search",
  Grep: "search",
  LS: "search",
  ToolSearch: "search",
  WebFetch: "web",
  WebSearch: "web",
  Task: "task",
  Agent: "task",
  TaskOutput: "task",
  TaskStop: "task",
  SendMessage: "task",
  TodoWrite: "todo",
  AskUserQuestion: "question",
  EnterPlanMode: "plan",
  ExitPlanMode: "plan",
};

export function toolKind(toolName: string): ToolKind {
  if (Object.hasOwn(KINDS, toolName)) return KINDS[toolName] ?? "other";
  if (toolName.startsWith("mcp__")) return "mcp";
  return "other";
}

export function toolStatusMessage(toolName: string): string {
  return `Using ${toolName}…`;
}

/** The tool whose calls become `user_question` events. */
export const ASK_USER_QUESTION = "AskUserQuestion";
