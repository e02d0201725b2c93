import path from "node:path";
import { z } from "zod";
import { httpUrl, list } from "../../env-fields.js";
import { anthropicApi } from "../../gateway/anthropic.js";
import type { WorktreeLayout } from "../../worktrees/worktree.js";
import { childEnvironment, type EnvPolicy } from "../child-env.js";
import { installedBin } from "../installed-bin.js";
import type { AgentPlugin } from "../plugin.js";
import { CLAUDE_CAPABILITIES, claudeBackend } from "./backend.js";
import { anthropicUpstream, CREDENTIAL_VARIABLES, withoutUpstream } from "./credentials.js";
import { ASK_USER_QUESTION } from "./tools.js";

/** The `claude` shipped in the installed @anthropic-ai/claude-code package, else the one on PATH. */
export function defaultClaudeBin(): string {
  return installedBin("@anthropic-ai/claude-code", "claude");
}

/** Where `claude -w <id>` makes a session's worktree. */
export const CLAUDE_WORKTREES: WorktreeLayout = {
  directory: (repo, sessionId) => path.join(repo, ".claude", "worktrees", sessionId),
};

/** Its variables, its credentials among them, and cloud ones only once the CLI is switched to that cloud. */
const envPolicy: EnvPolicy = {
  prefixes: [
    "ANTHROPIC_",
    "CLAUDE_",
    // The CLI's own switches that only turn things off (DISABLE_TELEMETRY, DISABLE_AUTOUPDATER, …).
    "DISABLE_",
  ],
  // Cloud credentials for Bedrock and Vertex. OTEL_* too: the CLI's own telemetry reads them once
  // CLAUDE_CODE_ENABLE_TELEMETRY is on, and before that they are only the bridge's exporter
  // settings, whose headers often hold a tracing vendor's key.
  switched: [
    { switch: "CLAUDE_CODE_USE_BEDROCK", prefixes: ["AWS_"] },
    { switch: "CLAUDE_CODE_USE_VERTEX", prefixes: ["GOOGLE_", "CLOUD_ML_"] },
    { switch: "CLAUDE_CODE_ENABLE_TELEMETRY", prefixes: ["OTEL_"] },
  ],
};

const env = {
  AGENT_BRIDGE_CLAUDE_BIN: z.string().min(1).optional(),
  AGENT_BRIDGE_CLAUDE_MODEL: z.string().min(1).optional(),
  AGENT_BRIDGE_CLAUDE_ENV_ALLOW: list.default([]),
  // The Claude CLI's own: where its API is (the gateway's upstream, src/gateway/).
  ANTHROPIC_BASE_URL: httpUrl.optional(),
};

/** Claude Code (`@anthropic-ai/claude-code`). */
export const claudePlugin: AgentPlugin<"claude", typeof env> = {
  name: "claude",
  env,
  secrets: CREDENTIAL_VARIABLES,
  section(settings, environment) {
    const childEnv = childEnvironment(
      environment,
      settings.AGENT_BRIDGE_CLAUDE_ENV_ALLOW,
      envPolicy,
    );
    const upstream = anthropicUpstream(environment);
    return {
      bin: settings.AGENT_BRIDGE_CLAUDE_BIN ?? defaultClaudeBin(),
      model: settings.AGENT_BRIDGE_CLAUDE_MODEL,
      childEnv: upstream ? withoutUpstream(childEnv) : childEnv,
      upstream,
      prices: {},
    };
  },
  envPolicy,
  worktree: CLAUDE_WORKTREES,
  capabilities: CLAUDE_CAPABILITIES,
  isQuestion: (toolName) => toolName === ASK_USER_QUESTION,
  gatewayApi: anthropicApi,
  create: (section, deps) =>
    claudeBackend({
      bin: section.bin,
      env: section.childEnv,
      driver: deps.driver,
      ...(deps.runAs ? { runAs: deps.runAs } : {}),
      mcpServers: deps.mcpServers,
      ...(deps.gateway ? { gateway: deps.gateway } : {}),
    }),
};
