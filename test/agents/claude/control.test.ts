import { describe, expect, it } from "vitest";
import { ASK_DENY_MESSAGE, answerControlRequest } from "../../../src/agents/claude/control.js";
import { controlRequest, QUESTION_INPUT } from "../../support/stream-json-lines.js";

const parse = (line: string) => {
  expect(line.endsWith("\n")).toBe(true);
  return JSON.parse(line);
};

describe("answerControlRequest", () => {
  it("denies AskUserQuestion, telling the model to ask in plain text, and hands back the question", () => {
    const answer = answerControlRequest(
      controlRequest("r1", "AskUserQuestion", QUESTION_INPUT, "toolu_q"),
    );
    expect(answer?.question).toEqual({ toolUseId: "toolu_q", input: QUESTION_INPUT });
    expect(parse(answer?.line ?? "")).toEqual({
      type: "control_response",
      response: {
        subtype: "success",
        request_id: "r1",
        response: { behavior: "deny", message: ASK_DENY_MESSAGE },
      },
    });
    expect(ASK_DENY_MESSAGE).toMatch(/end your turn/i);
  });

  it("denies any other tool, saying the bridge runs non-interactively", () => {
    const answer = answerControlRequest(
      controlRequest("r2", "Bash", { command: "rm -rf /" }, "toolu_b"),
    );
    expect(answer?.question).toBeUndefined();
    const response = parse(answer?.line ?? "").response;
    expect(response.request_id).toBe("r2");
    expect(response.response.behavior).toBe("deny");
    expect(response.response.message).toMatch(/Bash.*non-interactively/);
  });

  it("answers an unknown request subtype with an error instead of leaving the CLI waiting", () => {
    const answer = answerControlRequest({
      type: "control_request",
      request_id: "r3",
      request: { subtype: "hook_callback" },
    });
    expect(parse(answer?.line ?? "").response).toMatchObject({
      subtype: "error",
      request_id: "r3",
    });
  });

  it("ignores a request without a request id", () => {
    expect(
      answerControlRequest({ type: "control_request", request: { subtype: "can_use_tool" } }),
    ).toBeUndefined();
  });
});
