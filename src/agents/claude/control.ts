import { isRecord, type Json } from "../line-fields.js";
import { ASK_USER_QUESTION } from "./tools.js";

// Answers the CLI's control requests (`--permission-prompt-tool stdio`). Until clients can answer
// over REST, the bridge answers for them, the way `-p` would: every tool that needs approval is
// denied, and an AskUserQuestion is denied with a message that makes the model end its turn with
// the question in plain text, so the user's next message carries the answer. The runner writes
// the returned line to the CLI's stdin; the question itself reaches the client as a
// `user_question` event (emitted by the mapper, exactly once).

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

export interface ControlAnswer {
  /** The control_response line for the CLI's stdin, with its `\n`. */
  line: string;
  /** Set for an AskUserQuestion: the question to show the client. */
  question?: { toolUseId: string; input: unknown };
}

function responseLine(response: Json): string {
  return `${JSON.stringify({ type: "control_response", response })}\n`;
}

/** The answer to one `control_request` line; undefined when it carries no request id. */
export function answerControlRequest(line: Json): ControlAnswer | undefined {
  const requestId = line.request_id;
  if (typeof requestId !== "string") return undefined;
  const request = isRecord(line.request) ? line.request : {};
  if (request.subtype !== "can_use_tool") {
    // Nothing else is configured (no hooks, no SDK MCP servers); say so rather than hang the CLI.
    return {
      line: responseLine({
        subtype: "error",
        request_id: requestId,
        error: `agent-bridge does not handle control requests of subtype ${String(request.subtype)}`,
      }),
    };
  }
  const toolName = typeof request.tool_name === "string" ? request.tool_name : "this tool";
  const deny = (message: string) =>
    responseLine({
      subtype: "success",
      request_id: requestId,
      response: { behavior: "deny", message },
    });
  if (toolName === ASK_USER_QUESTION) {
    const toolUseId = typeof request.tool_use_id === "string" ? request.tool_use_id : undefined;
    return {
      line: deny(ASK_DENY_MESSAGE),
      ...(toolUseId === undefined ? {} : { question: { toolUseId, input: request.input } }),
    };
  }
  return { line: deny(toolDenyMessage(toolName)) };
}
