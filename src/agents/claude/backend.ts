import type { RunAs } from "../../process/agent-user.js";
import type { DriverConfig } from "../../process/driver.js";
import { createVersionProbe } from "../../process/version-probe.js";
import type { AgentBackend, AgentRunRequest, RunContext } from "../agent.js";
import { joinSystemPrompts, SessionSettings } from "../agent.js";
import { findCredentials } from "./credentials.js";
import { runClaude } from "./runner.js";

// Claude Code as an agent back-end: every session setting is its own, the bridge's session id is
// also the CLI's (`--session-id` on the first run, `--resume` after), and a run's budget is the
// CLI's `--max-budget-usd`.

export interface ClaudeBackendConfig {
  bin: string;
  /** The child's environment (see env.ts `childEnvironment`). */
  env: Record<string, string>;
  driver: Omit<DriverConfig, "logger" | "onSpawn">;
  /** Set: the version probe runs as the agents' user, proving that user can run the CLI too. */
  runAs?: RunAs;
}

export function claudeBackend(config: ClaudeBackendConfig): AgentBackend {
  const probe = createVersionProbe("claude", config.bin, config.env, config.runAs);
  return {
    name: "claude",
    settings: SessionSettings,
    async ready() {
      const [version, credentials] = await Promise.all([probe(), findCredentials(config.env)]);
      return { bin: config.bin, version, credentials };
    },
    run(request: AgentRunRequest, context: RunContext, signal: AbortSignal) {
      const { settings, identity } = request;
      const appendSystemPrompt = joinSystemPrompts(request);
      return runClaude(
        {
          prompt: request.prompt,
          claudeSessionId: request.sessionId,
          resume: request.resume,
          ...(settings.worktree ? { worktree: request.sessionId } : {}),
          permissionMode: settings.permissionMode,
          effort: settings.effort,
          ...(settings.model ? { model: settings.model } : {}),
          ...(appendSystemPrompt ? { appendSystemPrompt } : {}),
          ...(request.maxBudgetUsd !== null ? { maxBudgetUsd: request.maxBudgetUsd } : {}),
          cwd: request.cwd,
          ...(identity ? { identity } : {}),
        },
        { ...config.driver, bin: config.bin, env: config.env, ...context },
        signal,
      );
    },
  };
}
