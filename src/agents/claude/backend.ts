import type { BridgeEvent } from "../../events.js";
import { errorText, type Logger } from "../../log.js";
import { agentFiles } from "../../process/agent-files.js";
import type { RunAs } from "../../process/agent-user.js";
import type { DriverConfig } from "../../process/driver/driver-config.js";
import { AgentSpawnError, InvalidRunRequestError } from "../../process/errors.js";
import type { SandboxGateway } from "../../process/sandbox-gateway.js";
import { createVersionProbe } from "../../process/version-probe.js";
import { SessionSettings } from "../../session-settings.js";
import type { AgentBackend, AgentRunRequest, RunContext } from "../agent.js";
import { joinSystemPrompts, runBudget } from "../agent.js";
import { type GatewayAccess, sandboxGateway, throughGateway } from "../gateway-access.js";
import { type McpCatalog, mcpConfigOf } from "../mcp-servers.js";
import type { AgentCapabilities } from "../plugin.js";
import { findCredentials } from "./credentials.js";
import { failedRun, LABEL, runClaude } from "./runner.js";
import { claudeTranscripts } from "./transcripts.js";
import { ownApiMs } from "./usage.js";

// Claude Code as an agent back-end: every session setting is its own, the bridge's session id is
// also the CLI's (`--session-id` on the first run, `--resume` after, `--resume-session-at` for a
// retry, `--fork-session` for a fork's first run: fork.ts), a run's budget is the CLI's `--max-budget-usd`, and its MCP servers are the admin's
// named by the session, alone. With the model gateway, the CLI calls its API through it, with a
// token of the run's own that dies with the run, and never holds the operator's credential.

export interface ClaudeBackendConfig {
  bin: string;
  /** The child's environment (see env.ts `childEnvironment`). */
  env: Record<string, string>;
  driver: Omit<DriverConfig, "logger" | "onSpawn">;
  /** Set: the version probe runs as the agents' user, proving that user can run the CLI too. */
  runAs?: RunAs;
  /** The MCP servers sessions may name (AGENT_BRIDGE_MCP_CONFIG). */
  mcpServers: McpCatalog;
  /** Set: the CLI's calls go through the model gateway (its env then holds no credential). */
  gateway?: GatewayAccess;
}

/** Claude Code can do everything the bridge asks of an agent. */
export const CLAUDE_CAPABILITIES: AgentCapabilities = {
  resumeAtMessage: true,
  interrupt: true,
  approvals: true,
  fork: true,
  steering: true,
};

export function claudeBackend(config: ClaudeBackendConfig): AgentBackend {
  const probe = createVersionProbe("claude", config.bin, config.env, {
    ...(config.runAs ? { runAs: config.runAs } : {}),
    ...(config.driver.sandbox ? { sandbox: config.driver.sandbox } : {}),
  });
  return {
    name: "claude",
    settings: SessionSettings,
    resumesAtMessage: CLAUDE_CAPABILITIES.resumeAtMessage,
    interruptible: CLAUDE_CAPABILITIES.interrupt,
    transcripts: (identity) =>
      claudeTranscripts(
        { ...config.env, ...identity?.env },
        agentFiles(config.env, identity?.runAs),
      ),
    async ready() {
      const [version, credentials] = await Promise.all([
        probe(),
        config.gateway ? config.gateway.source : findCredentials(config.env),
      ]);
      return { bin: config.bin, version, credentials };
    },
    run(request: AgentRunRequest, context: RunContext, signal: AbortSignal) {
      const { settings, identity } = request;
      const appendSystemPrompt = joinSystemPrompts(request);
      const budget = runBudget(request);
      let mcpConfig: string | undefined;
      try {
        if (settings.mcpServers.length > 0) {
          mcpConfig = mcpConfigOf(config.mcpServers, settings.mcpServers);
        }
      } catch (err) {
        return failedRun(new InvalidRunRequestError((err as Error).message));
      }
      const run = (env: Record<string, string>, gateway?: SandboxGateway) =>
        runClaude(
          {
            prompt: request.prompt,
            attachments: request.attachments,
            claudeSessionId: request.sessionId,
            resume: request.resume,
            ...(request.forkOf ? { forkOf: request.forkOf } : {}),
            ...(request.resumeAt !== null ? { resumeAt: request.resumeAt } : {}),
            ...(settings.worktree ? { worktree: request.sessionId } : {}),
            permissionMode: settings.permissionMode,
            effort: settings.effort,
            ...(settings.model ? { model: settings.model } : {}),
            ...(appendSystemPrompt ? { appendSystemPrompt } : {}),
            ...(budget ? { maxBudgetUsd: budget.usd, ownBudget: budget.own } : {}),
            ...(settings.maxTurns !== null ? { maxTurns: settings.maxTurns } : {}),
            ...(mcpConfig ? { mcpConfig } : {}),
            ...(request.allowedTools.length > 0 ? { allowedTools: request.allowedTools } : {}),
            ...(settings.disallowedTools.length > 0
              ? { disallowedTools: settings.disallowedTools }
              : {}),
            ...(settings.addDirs.length > 0 ? { addDirs: settings.addDirs } : {}),
            ...(request.outputSchema ? { outputSchema: request.outputSchema } : {}),
            toolRules: request.toolRules,
            ...(settings.requireCleanWorkDir ? { cleanWorkDir: request.git } : {}),
            cwd: request.cwd,
            ...(identity ? { identity } : {}),
          },
          {
            ...config.driver,
            bin: config.bin,
            env,
            ...context,
            ...(gateway ? { gateway } : {}),
          },
          signal,
        );
      const events = config.gateway
        ? throughGateway(
            config.gateway,
            config.env,
            request,
            context,
            (env, access) =>
              run({ ...env, ANTHROPIC_BASE_URL: access.baseUrl }, sandboxGateway(access)),
            (cause) => failedRun(new AgentSpawnError(LABEL, cause)),
          )
        : run(config.env);
      // A session's first run has no earlier API time to take off; a fork's goes on from the
      // copied conversation's (fork.ts).
      return request.resume || request.forkOf
        ? withOwnApiTime(events, request, context.logger)
        : events;
    },
  };
}

/**
 * The run's batches, its completion's `duration_api_ms` made the run's own: on --resume (and in a
 * fork) the CLI reports the conversation's running total (as it does its cost), which the
 * session's earlier runs, and a fork's origin, recorded their shares of.
 */
async function* withOwnApiTime(
  batches: AsyncGenerator<BridgeEvent[]>,
  request: AgentRunRequest,
  logger: Logger,
): AsyncGenerator<BridgeEvent[]> {
  // Read as the CLI starts, not when its result comes: the session's earlier runs are all ended,
  // and the completion (with the events of its batch) then waits for no statement. Its failure is
  // met where it is awaited.
  const before = request.usageBefore();
  before.catch(() => {});
  for await (const batch of batches) {
    const last = batch.at(-1);
    if (last?.type === "completion" && last.usage.duration_api_ms > 0) {
      try {
        const earlier = (await before)?.duration_api_ms ?? 0;
        const own = ownApiMs(last.usage.duration_api_ms, earlier);
        batch[batch.length - 1] = { ...last, usage: { ...last.usage, duration_api_ms: own } };
      } catch (err) {
        // The run's outcome goes out all the same, with the CLI's figure.
        logger.warn("could not read the session's earlier API time", { error: errorText(err) });
      }
    }
    yield batch;
  }
}
