import { describe, expect, it } from "vitest";
import type { PermissionRequest } from "../../../src/agents/agent.js";
import {
  ASK_DENY_MESSAGE,
  permissionResponseLine,
  readControlRequest,
} from "../../../src/agents/claude/control.js";
import { controlRequest, QUESTION_INPUT } from "../../support/stream-json-lines.js";

const parse = (line: string) => {
  expect(line.endsWith("\n")).toBe(true);
  return JSON.parse(line);
};

/** The permission request of a can_use_tool line. */
const permission = (line: Record<string, unknown>): PermissionRequest => {
  const read = readControlRequest(line);
  if (read?.kind !== "permission") throw new Error(`not a permission request: ${read?.kind}`);
  return read.request;
};

describe("the claude control protocol", () => {
  it("reads a can_use_tool request with what the CLI says of it", () => {
    const request = permission({
      type: "control_request",
      request_id: "r0",
      request: {
        subtype: "can_use_tool",
        tool_name: "Bash",
        input: { command: "echo hi > out.txt" },
        tool_use_id: "toolu_b",
        permission_suggestions: [{ type: "addRules", rules: [{ toolName: "Bash" }] }],
        blocked_path: "/w/out.txt",
        display_name: "Bash",
      },
    });
    expect(request).toEqual({
      requestId: "r0",
      toolName: "Bash",
      toolUseId: "toolu_b",
      input: { command: "echo hi > out.txt" },
      suggestions: [{ type: "addRules", rules: [{ toolName: "Bash" }] }],
      details: { blocked_path: "/w/out.txt" },
      questions: [],
    });
  });

  it("denies an AskUserQuestion by policy telling the model to ask in plain text", () => {
    const request = permission(controlRequest("r1", "AskUserQuestion", QUESTION_INPUT, "toolu_q"));
    expect(parse(permissionResponseLine(request, { behavior: "deny" }))).toEqual({
      type: "control_response",
      response: {
        subtype: "success",
        request_id: "r1",
        response: { behavior: "deny", message: ASK_DENY_MESSAGE },
      },
    });
    expect(ASK_DENY_MESSAGE).toMatch(/end your turn/i);
  });

  it("denies any other tool by policy, saying the bridge runs non-interactively", () => {
    const request = permission(controlRequest("r2", "Bash", { command: "rm -rf /" }, "toolu_b"));
    const response = parse(permissionResponseLine(request, { behavior: "deny" })).response;
    expect(response.request_id).toBe("r2");
    expect(response.response.behavior).toBe("deny");
    expect(response.response.message).toMatch(/Bash.*non-interactively/);
  });

  it("allows with the original input when the answer changes none, and passes rules on", () => {
    const request = permission(
      controlRequest("r4", "Write", { file_path: "a", content: "b" }, "t"),
    );
    const rules = [{ type: "addRules", rules: [{ toolName: "Write" }], behavior: "allow" }];
    const allow = parse(
      permissionResponseLine(request, { behavior: "allow", updatedPermissions: rules }),
    );
    expect(allow.response.response).toEqual({
      behavior: "allow",
      updatedInput: { file_path: "a", content: "b" },
      updatedPermissions: rules,
    });
    const deny = parse(
      permissionResponseLine(request, { behavior: "deny", message: "no", interrupt: true }),
    );
    expect(deny.response.response).toEqual({ behavior: "deny", message: "no", interrupt: true });
  });

  it("answers an unknown request subtype with an error instead of leaving the CLI waiting", () => {
    const read = readControlRequest({
      type: "control_request",
      request_id: "r3",
      request: { subtype: "hook_callback" },
    });
    expect(read?.kind).toBe("unsupported");
    expect(parse(read?.kind === "unsupported" ? read.line : "").response).toMatchObject({
      subtype: "error",
      request_id: "r3",
    });
  });

  it("ignores a request without a request id", () => {
    expect(
      readControlRequest({ type: "control_request", request: { subtype: "can_use_tool" } }),
    ).toBeUndefined();
  });
});
