import { describe, expect, it } from "vitest";
import {
  answerHookCallback,
  initializeRequestLine,
  readInitializeAnswer,
} from "../../../src/agents/claude/hooks.js";

// The `initialize` request and the hook callbacks, as lines (the real CLI's side of it is in
// test/runs/tool-rules.real.test.ts).

const RULES = { key: [], session: [{ tool: "Bash", command: "rm *", decision: "deny" as const }] };
const callback = (callbackId: string, command: string) => ({
  subtype: "hook_callback",
  callback_id: callbackId,
  input: {
    hook_event_name: "PreToolUse",
    tool_name: "Bash",
    tool_input: { command },
    tool_use_id: "toolu_1",
  },
  tool_use_id: "toolu_1",
});

describe("the initialize request and hook callbacks", () => {
  it("registers the PreToolUse hook only for a run with rules", () => {
    expect(JSON.parse(initializeRequestLine(undefined)).request).toEqual({
      subtype: "initialize",
      hooks: {},
    });
    expect(JSON.parse(initializeRequestLine(RULES)).request.hooks).toEqual({
      PreToolUse: [{ hookCallbackIds: ["tool_rules"] }],
    });
  });

  it("reads the commands' descriptions and hint from the answer, and whether the hooks were applied", () => {
    const answer = readInitializeAnswer({
      type: "control_response",
      response: {
        subtype: "success",
        request_id: "initialize",
        response: {
          commands: [
            {
              name: "debug",
              description: "Enable debug logging",
              argumentHint: "[issue description]",
            },
            { name: "clear", description: "", argumentHint: "" },
          ],
          hooks_applied: true,
        },
      },
    });
    expect(answer?.hooksApplied).toBe(true);
    expect([...(answer?.commands ?? [])]).toEqual([
      ["debug", { description: "Enable debug logging", argumentHint: "[issue description]" }],
      ["clear", {}],
    ]);
    const refused = {
      type: "control_response",
      response: { subtype: "error", request_id: "initialize", error: "no" },
    };
    expect(readInitializeAnswer(refused)?.hooksApplied).toBe(false);
    const other = {
      type: "control_response",
      response: { subtype: "success", request_id: "x", response: {} },
    };
    expect(readInitializeAnswer(other)).toBeUndefined();
  });

  it("a matching deny answers permissionDecision deny with the reason and records the decision; no match answers {}", () => {
    const denied = answerHookCallback("r1", callback("tool_rules", "rm -rf x"), RULES);
    expect(JSON.parse(denied?.line ?? "")).toEqual({
      type: "control_response",
      response: {
        subtype: "success",
        request_id: "r1",
        response: {
          hookSpecificOutput: {
            hookEventName: "PreToolUse",
            permissionDecision: "deny",
            permissionDecisionReason: "the session's tool rule 0 denies this tool use",
          },
        },
      },
    });
    expect(denied?.event).toMatchObject({
      type: "tool_rule",
      tool_use_id: "toolu_1",
      decision: "deny",
      source: "session",
      rule_index: 0,
    });
    const free = answerHookCallback("r2", callback("tool_rules", "ls"), RULES);
    expect(JSON.parse(free?.line ?? "").response.response).toEqual({});
    expect(free?.event).toBeUndefined();
  });

  it("a callback the bridge did not register gets an error naming it", () => {
    const answer = answerHookCallback("r3", callback("stop_git_check", "ls"), RULES);
    expect(JSON.parse(answer?.line ?? "").response).toEqual({
      subtype: "error",
      request_id: "r3",
      error: 'agent-bridge registered no hook callback "stop_git_check"',
    });
    expect(answerHookCallback("r4", { subtype: "can_use_tool" }, RULES)).toBeUndefined();
  });
});
