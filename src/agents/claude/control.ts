import { PERMISSION_DETAILS, type PermissionAnswer, type PermissionRequest } from "../agent.js";
import type { Json } from "../line-fields.js";
import { readLine } from "./sdk-lines.js";
import type { SDKControlResponse } from "./sdk-messages.js";
import { ASK_USER_QUESTION, parseQuestions } from "./tools.js";

// The CLI's control protocol (`--permission-prompt-tool stdio`), as data both ways: a
// `can_use_tool` request becomes a generic PermissionRequest, and its answer (from the run layer,
// RunContext.approve) the control_response line the runner writes to the CLI's stdin. A refusal
// nobody put in words (the bridge's policy, `approvals: "deny"`) gets the words of `-p`: a tool is
// denied, and an AskUserQuestion is denied with a message that makes the model end its turn with
// the question in plain text, so the user's next message carries the answer.

export const ASK_DENY_MESSAGE =
  "The user cannot answer interactive questions here: agent-bridge runs this session " +
  "non-interactively. End your turn now and ask the question in plain text in your reply, " +
  "listing the options; the user's next message will carry the answer.";

export function toolDenyMessage(toolName: string): string {
  return (
    `Permission to use ${toolName} was denied: agent-bridge runs this session non-interactively ` +
    "and this tool needs an approval that nobody can give here. Continue without it, or explain " +
    "in your reply what you need and why."
  );
}

/** One control_request line: a permission to ask for, or the answer to one the bridge refuses. */
export type ControlRequest =
  | { kind: "permission"; request: PermissionRequest }
  | { kind: "unsupported"; line: string };

function responseLine(response: SDKControlResponse["response"]): string {
  const line: SDKControlResponse = { type: "control_response", response };
  return `${JSON.stringify(line)}\n`;
}

/** What one `control_request` line asks; undefined when it carries no request id. */
export function readControlRequest(line: Json): ControlRequest | undefined {
  const message = readLine(line);
  if (message.type !== "control_request") return undefined;
  const { request_id: requestId, request } = message;
  if (request.subtype !== "can_use_tool") {
    // Hook callbacks are hooks.ts's; nothing else is configured (no SDK MCP servers): say so
    // rather than hang the CLI.
    return {
      kind: "unsupported",
      line: responseLine({
        subtype: "error",
        request_id: requestId,
        error: `agent-bridge does not handle control requests of subtype ${request.requested}`,
      }),
    };
  }
  const details: PermissionRequest["details"] = {};
  for (const name of PERMISSION_DETAILS) {
    const value = request[name];
    if (value !== undefined) details[name] = value;
  }
  const toolName = request.tool_name ?? "this tool";
  return {
    kind: "permission",
    request: {
      requestId,
      toolName,
      toolUseId: request.tool_use_id ?? null,
      input: request.input,
      suggestions: request.permission_suggestions,
      details,
      questions: toolName === ASK_USER_QUESTION ? parseQuestions(request.input) : [],
    },
  };
}

/** The control_response line (with its `\n`) that gives the CLI `answer` to `request`. */
export function permissionResponseLine(
  request: PermissionRequest,
  answer: PermissionAnswer,
): string {
  const response: Json =
    answer.behavior === "allow"
      ? {
          behavior: "allow",
          // Always sent: the CLI takes a missing one as an empty input.
          updatedInput: answer.updatedInput ?? request.input,
          ...(answer.updatedPermissions ? { updatedPermissions: answer.updatedPermissions } : {}),
        }
      : {
          behavior: "deny",
          message: answer.message ?? policyDenyMessage(request.toolName),
          ...(answer.interrupt ? { interrupt: true } : {}),
        };
  return responseLine({ subtype: "success", request_id: request.requestId, response });
}

/** The bridge's own control request that makes the CLI end its turn with a `result`. */
export function interruptRequestLine(requestId: string): string {
  const line = {
    type: "control_request",
    request_id: requestId,
    request: { subtype: "interrupt" },
  };
  return `${JSON.stringify(line)}\n`;
}

function policyDenyMessage(toolName: string): string {
  return toolName === ASK_USER_QUESTION ? ASK_DENY_MESSAGE : toolDenyMessage(toolName);
}
