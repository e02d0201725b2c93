import type { BridgeEvent } from "../../events.js";
import {
  hasToolRules,
  matchToolRule,
  type RunToolRules,
  type ToolRuleMatch,
  toolRuleReason,
} from "../../tool-rules.js";
import { isRecord, type Json } from "../line-fields.js";

// The `initialize` control request and the hook callbacks it registers. Observed with Claude Code
// 2.1.328 against the mock Messages API, started as the bridge starts it (stream-json both ways,
// `--permission-prompt-tool stdio`, `--replay-user-messages`); test/agents/claude/hooks.real.test.ts
// holds the runs that show it:
//
// - `{"type":"control_request","request_id":R,"request":{"subtype":"initialize","hooks":{…}}}`
//   written to stdin right before the prompt's user message (after it works too) is answered
//   first of all, before the `system/init` line: `{"type":"control_response","response":
//   {"subtype":"success","request_id":R,"response":{commands, agents, models, account,
//   output_style, available_output_styles, pid, claude_code_version, current_permission_mode,
//   hooks_applied: true, capabilities, …}}}`. `commands` are the slash commands, each
//   `{name, description, argumentHint ("" when it takes nothing), builtin, aliases?}` (44 with a
//   fresh HOME; the init line's `slash_commands` names the same ones, without descriptions).
// - `hooks` maps an event to matchers, `{"matcher"?: regex of tool names, "hookCallbackIds":[…]}`;
//   no matcher: every tool. Before each matching tool use the CLI asks, in every permission mode
//   (bypassPermissions too): `{"type":"control_request","request_id":R,"request":{"subtype":
//   "hook_callback","callback_id":ID,"input":{session_id, transcript_path, cwd, prompt_id,
//   permission_mode, effort, hook_event_name:"PreToolUse", tool_name, tool_input, tool_use_id},
//   "tool_use_id":…}}`, and waits for `{"type":"control_response","response":{"subtype":"success",
//   "request_id":R,"response":OUTPUT}}`, OUTPUT being a hook's JSON output.
// - OUTPUT `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":D,
//   "permissionDecisionReason":WHY}}`: D `deny` refuses the use, its tool_result (is_error) saying
//   "PreToolUse:Bash hook error: WHY"; `ask` makes the CLI send the usual `can_use_tool` request
//   (bypass mode too), with `decision_reason: WHY`, `decision_reason_type: "hook"`, which the
//   bridge answers as any other (control.ts); `allow` runs the tool without asking, even in the
//   default mode, which is why the bridge never sends it (an `allow` rule leaves the use to the
//   mode: src/tool-rules.ts). OUTPUT `{}`: the hook has no say, the permission mode decides.
// - With `--replay-user-messages` the CLI echoes every control_response written to it back on
//   stdout, the hook answers too (steering.ts reads and drops them).
// - `"Stop":[{"hookCallbackIds":[ID]}]` (no matcher): each time the agent would end its turn
//   (before the `result` line) the CLI asks `hook_callback` with `input: {session_id,
//   transcript_path, cwd, prompt_id, permission_mode, effort: {level}, hook_event_name: "Stop",
//   stop_hook_active, last_assistant_message (its last text), background_tasks: [],
//   session_crons: []}` and a `tool_use_id` of its own (a UUID). `stop_hook_active` is false on
//   the turn's first try and true on each try after a block. OUTPUT `{}` lets it stop;
//   `{"decision":"block","reason":WHY}` sends it back: the CLI writes a user line
//   `{"type":"user","message":{"role":"user","content":[{"type":"text","text":"Stop hook
//   feedback:\nWHY"}]},"isSynthetic":true,…}` and a `system/notification` (`key:
//   "stop-hook-error"`), and its next API request ends with a user message of the text
//   `Stop:Callback hook blocking error from command: "callback": WHY`; the turn goes on, and its
//   one `result` comes when a Stop is let through (`num_turns` counting both).
//   stop-check.ts answers it (a session's `require_clean_work_dir`).

/** The callback id of the PreToolUse hook that enforces the run's tool rules. */
export const TOOL_RULES_CALLBACK = "tool_rules";

/** The request id of the run's one `initialize`. */
export const INITIALIZE_REQUEST_ID = "initialize";

/** The `initialize` line (with `\n`) that registers the hooks the run needs (none without rules). */
export function initializeRequestLine(
  rules: RunToolRules | undefined,
  /** Set: the Stop hook of this callback id (stop-check.ts). */
  stopCallback?: string,
): string {
  const hooks = {
    ...(hasToolRules(rules) ? { PreToolUse: [{ hookCallbackIds: [TOOL_RULES_CALLBACK] }] } : {}),
    ...(stopCallback ? { Stop: [{ hookCallbackIds: [stopCallback] }] } : {}),
  };
  const line = {
    type: "control_request",
    request_id: INITIALIZE_REQUEST_ID,
    request: { subtype: "initialize", hooks },
  };
  return `${JSON.stringify(line)}\n`;
}

/** A slash command as the initialize answer describes it. */
export interface CommandInfo {
  description?: string;
  argumentHint?: string;
}

/** What the answer to the run's `initialize` says. */
export interface InitializeAnswer {
  /** The slash commands' descriptions, by name. */
  commands: Map<string, CommandInfo>;
  /** The CLI took the hooks (`hooks_applied`); false too when it refused the request. */
  hooksApplied: boolean;
}

/** The answer to the run's `initialize`; undefined when `line` is not that answer. */
export function readInitializeAnswer(line: Json): InitializeAnswer | undefined {
  const response = isRecord(line.response) ? line.response : undefined;
  if (line.type !== "control_response" || response?.request_id !== INITIALIZE_REQUEST_ID) {
    return undefined;
  }
  const commands = new Map<string, CommandInfo>();
  const answer =
    response.subtype === "success" && isRecord(response.response) ? response.response : {};
  for (const command of Array.isArray(answer.commands) ? answer.commands : []) {
    if (!isRecord(command) || typeof command.name !== "string") continue;
    const info: CommandInfo = {};
    if (typeof command.description === "string" && command.description !== "") {
      info.description = command.description;
    }
    if (typeof command.argumentHint === "string" && command.argumentHint !== "") {
      info.argumentHint = command.argumentHint;
    }
    commands.set(command.name, info);
  }
  return { commands, hooksApplied: answer.hooks_applied === true };
}

/** What the bridge answers a `hook_callback` request: the line to write, the event to record. */
export interface HookAnswer {
  line: string;
  event?: Extract<BridgeEvent, { type: "tool_rule" }>;
}

function answerLine(requestId: string, output: Json): string {
  const line = {
    type: "control_response",
    response: { subtype: "success", request_id: requestId, response: output },
  };
  return `${JSON.stringify(line)}\n`;
}

function errorLine(requestId: string, error: string): string {
  const line = {
    type: "control_response",
    response: { subtype: "error", request_id: requestId, error },
  };
  return `${JSON.stringify(line)}\n`;
}

/**
 * The answer to one `hook_callback` control request (`request` is its `request`); undefined when
 * the line is no hook callback. A callback the bridge did not register gets an error.
 */
export function answerHookCallback(
  requestId: string,
  request: Json,
  rules: RunToolRules | undefined,
): HookAnswer | undefined {
  if (request.subtype !== "hook_callback") return undefined;
  const input = isRecord(request.input) ? request.input : {};
  if (request.callback_id !== TOOL_RULES_CALLBACK || !rules) {
    return {
      line: errorLine(
        requestId,
        `agent-bridge registered no hook callback ${JSON.stringify(request.callback_id)}`,
      ),
    };
  }
  const toolName = typeof input.tool_name === "string" ? input.tool_name : "";
  const toolUseId =
    typeof input.tool_use_id === "string"
      ? input.tool_use_id
      : typeof request.tool_use_id === "string"
        ? request.tool_use_id
        : null;
  const match = matchToolRule(rules, toolName, input.tool_input);
  if (!match) return { line: answerLine(requestId, {}) };
  return {
    line: answerLine(requestId, hookOutput(match)),
    event: {
      type: "tool_rule",
      tool_use_id: toolUseId,
      tool_name: toolName,
      decision: match.rule.decision,
      source: match.source,
      rule_index: match.index,
      ...(match.preset ? { preset: match.preset } : {}),
      ...(match.rule.decision === "allow" ? {} : { reason: toolRuleReason(match) }),
    },
  };
}

/** The hook's output for a rule's decision: `allow` leaves the use to the permission mode. */
function hookOutput(match: ToolRuleMatch): Json {
  if (match.rule.decision === "allow") return {};
  return {
    hookSpecificOutput: {
      hookEventName: "PreToolUse",
      permissionDecision: match.rule.decision,
      permissionDecisionReason: toolRuleReason(match),
    },
  };
}
