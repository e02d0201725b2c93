import { describe, expect, it } from "vitest";
import { buildCodexArgs } from "../../../src/agents/codex/command.js";
import { CodexSettings, SANDBOX_OF } from "../../../src/agents/codex/options.js";
import { InvalidRunRequestError } from "../../../src/process/errors.js";

// The real binary accepts these command lines: test/agents/codex/real-cli.test.ts runs them.

const THREAD = "01a22ed5-f437-7b40-8d0a-3eacdde351a8";

describe("buildCodexArgs", () => {
  it("starts a new thread with JSONL output, the sandbox as a config value and the prompt from stdin", () => {
    expect(buildCodexArgs({ sandbox: "read-only" })).toEqual([
      "exec",
      "--json",
      "--skip-git-repo-check",
      "-c",
      'sandbox_mode="read-only"',
      "--",
      "-",
    ]);
  });

  it("resumes a thread by its id after `--`, with the sandbox as a config value (resume has no --sandbox)", () => {
    expect(buildCodexArgs({ sandbox: "workspace-write", threadId: THREAD })).toEqual([
      "exec",
      "resume",
      "--json",
      "--skip-git-repo-check",
      "-c",
      'sandbox_mode="workspace-write"',
      "--",
      THREAD,
      "-",
    ]);
  });

  it("passes the model as one --model= argument, so a value starting with '-' stays a value", () => {
    const args = buildCodexArgs({ sandbox: "read-only", model: "--help" });
    expect(args).toContain("--model=--help");
    expect(args).not.toContain("--help");
  });

  it("passes the reasoning effort as the model_reasoning_effort config value", () => {
    const args = buildCodexArgs({ sandbox: "danger-full-access", reasoningEffort: "high" });
    expect(args.slice(3, 7)).toEqual([
      "-c",
      'sandbox_mode="danger-full-access"',
      "-c",
      'model_reasoning_effort="high"',
    ]);
  });

  it("names the model gateway as codex's provider, in config values before the prompt", () => {
    const args = buildCodexArgs({
      sandbox: "read-only",
      provider: { baseUrl: "http://127.0.0.1:9/openai", envKey: "OPENAI_API_KEY" },
    });
    expect(args.slice(5)).toEqual([
      "-c",
      'model_providers.agent_bridge={name="agent-bridge model gateway",base_url="http://127.0.0.1:9/openai",env_key="OPENAI_API_KEY",wire_api="responses"}',
      "-c",
      'model_provider="agent_bridge"',
      "--",
      "-",
    ]);
  });

  it("refuses a thread id that is not a UUID (codex would look it up as a thread name)", () => {
    for (const threadId of ["--last", "my-thread", "", `${THREAD} `]) {
      expect(() => buildCodexArgs({ sandbox: "read-only", threadId })).toThrow(
        InvalidRunRequestError,
      );
    }
  });
});

describe("CodexSettings", () => {
  const base = {
    permissionMode: "acceptEdits" as const,
    effort: "high" as const,
    model: null,
    systemPrompt: null,
    worktree: false,
    mcpServers: [],
    maxTurns: null,
    maxBudgetUsd: null,
    approvals: "deny" as const,
    disallowedTools: [],
    toolRules: [],
    addDirs: [],
    requireCleanWorkDir: false,
  };

  it("takes the permission modes that have a sandbox, and every effort", () => {
    for (const permissionMode of Object.keys(SANDBOX_OF)) {
      expect(CodexSettings.safeParse({ ...base, permissionMode }).success).toBe(true);
    }
    for (const effort of ["low", "medium", "high", "xhigh", "max"]) {
      expect(CodexSettings.safeParse({ ...base, effort, model: "gpt-5.5" }).success).toBe(true);
    }
  });

  it("refuses a permission mode without a codex equivalent, naming the field", () => {
    for (const permissionMode of ["auto", "dontAsk"]) {
      const parsed = CodexSettings.safeParse({ ...base, permissionMode });
      expect(parsed.error?.issues).toEqual([expect.objectContaining({ path: ["permissionMode"] })]);
    }
  });

  it("refuses a model that is not a plain slug", () => {
    for (const model of ["-x", "gpt 5", "", "a".repeat(101)]) {
      expect(CodexSettings.safeParse({ ...base, model }).success).toBe(false);
    }
  });
});
