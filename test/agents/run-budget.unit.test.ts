import { describe, expect, it } from "vitest";
import { type AgentRunRequest, runBudget } from "../../src/agents/agent.js";
import { GitRunner } from "../../src/worktrees/git.js";

// A run's spending cap: its own (the session's or its message's max_budget_usd) or what its key's
// monthly budget has left, whichever is smaller, and whose it is.

function request(own: number | null, key: number | null): AgentRunRequest {
  return {
    sessionId: "s",
    agentSessionId: null,
    resume: false,
    resumeAt: null,
    prompt: "p",
    attachments: [],
    settings: {
      permissionMode: "default",
      effort: "low",
      model: null,
      systemPrompt: null,
      worktree: false,
      mcpServers: [],
      maxTurns: null,
      maxBudgetUsd: own,
      approvals: "deny",
      disallowedTools: [],
      toolRules: [],
      addDirs: [],
      requireCleanWorkDir: false,
    },
    messageSystemPrompt: null,
    outputSchema: null,
    usageBefore: async () => undefined,
    maxBudgetUsd: key,
    cwd: "/",
    git: new GitRunner({ env: {} }).forSession(null, "/"),
    allowedTools: [],
    toolRules: { key: [], session: [] },
  };
}

describe("runBudget", () => {
  it("is none without either cap", () => {
    expect(runBudget(request(null, null))).toBeNull();
  });

  it("is the run's own cap, or the key's, when only one is set", () => {
    expect(runBudget(request(2, null))).toEqual({ usd: 2, own: true });
    expect(runBudget(request(null, 5))).toEqual({ usd: 5, own: false });
  });

  it("is the smaller of the two, and the run's own when they are equal", () => {
    expect(runBudget(request(2, 5))).toEqual({ usd: 2, own: true });
    expect(runBudget(request(5, 2))).toEqual({ usd: 2, own: false });
    expect(runBudget(request(3, 3))).toEqual({ usd: 3, own: true });
  });
});
