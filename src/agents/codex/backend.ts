import { dirname, join } from "node:path";
import type { BridgeEvent } from "../../events.js";
import { errorText } from "../../log.js";
import { type PriceTable, priceOf } from "../../prices.js";
import { agentFiles } from "../../process/agent-files.js";
import type { RunAs } from "../../process/agent-user.js";
import type { AgentCommand, LineProtocol } from "../../process/driver/agent-command.js";
import { driveAgentProcess } from "../../process/driver/drive.js";
import type { DriverConfig } from "../../process/driver/driver-config.js";
import {
  AgentNotAuthenticatedError,
  AgentSpawnError,
  InvalidRunRequestError,
  RunnerError,
  WorktreeUnavailableError,
} from "../../process/errors.js";
import { type RunFiles, withRunFiles } from "../../process/run-files.js";
import type { SandboxGateway } from "../../process/sandbox-gateway.js";
import { createVersionProbe } from "../../process/version-probe.js";
import { ensureSessionWorktree, type WorktreeLayout } from "../../worktrees/worktree.js";
import type { AgentBackend, AgentRunRequest, RunContext } from "../agent.js";
import { joinSystemPrompts } from "../agent.js";
import { type GatewayAccess, sandboxGateway, throughGateway } from "../gateway-access.js";
import { imageExtension } from "../images.js";
import type { AgentCapabilities } from "../plugin.js";
import { buildCodexArgs, type CodexProvider } from "./command.js";
import { operatorCodexHome } from "./credentials.js";
import { CodexMapper, type CodexUsageTotals } from "./mapper.js";
import { CodexSettings, codexSandboxing, SANDBOX_OF } from "./options.js";
import { seedTenantCodexHome } from "./tenant-config.js";
import { codexTranscripts } from "./transcripts.js";

// OpenAI's Codex CLI as an agent back-end, on the shared process driver: `codex exec --json` for a
// session's first run, `codex exec resume <thread>` once a run has reported its thread id (kept as
// the session's agent_session_id); the prompt on stdin, which then closes, and its images as
// files of the run's (`--image`), removed once codex is gone. codex's model provider is the model
// gateway, with a token of the run's own that dies with the run: codex never holds the operator's
// key.

export interface CodexBackendConfig {
  bin: string;
  /** The child's environment (see child-env.ts). */
  env: Record<string, string>;
  driver: Omit<DriverConfig, "logger" | "onSpawn">;
  /** USD per million tokens, by model slug; a run of a model without one has no cost. */
  prices: PriceTable;
  /** Set: the version probe runs as the agents' user. */
  runAs?: RunAs;
  /** Set: codex's calls go through the model gateway (its env holds no key in any case). */
  gateway?: GatewayAccess;
  /** Set when the operator gave codex no key: why its runs fail before they start. */
  missingCredentials?: Error;
  /** Where a session's worktree is made. */
  worktree: WorktreeLayout;
}

/** `codex exec` continues a thread from its end only, and reads no control messages. */
export const CODEX_CAPABILITIES: AgentCapabilities = {
  resumeAtMessage: false,
  interrupt: false,
  approvals: false,
  fork: false,
  steering: false,
};

const LABEL = { name: "codex", binVariable: "AGENT_BRIDGE_CODEX_BIN" };

export function codexBackend(config: CodexBackendConfig): AgentBackend {
  const probe = createVersionProbe("codex", config.bin, config.env, {
    ...(config.runAs ? { runAs: config.runAs } : {}),
    ...(config.driver.sandbox ? { sandbox: config.driver.sandbox } : {}),
  });
  // Without a gateway codex may not run at all: it would call its API with a credential of its own.
  const { gateway } = config;
  const unavailable = gateway
    ? undefined
    : (config.missingCredentials ?? new Error("codex has no model gateway"));
  return {
    name: "codex",
    settings: CodexSettings,
    resumesAtMessage: CODEX_CAPABILITIES.resumeAtMessage,
    // A cancel stops its process group.
    interruptible: CODEX_CAPABILITIES.interrupt,
    transcripts: (identity) =>
      codexTranscripts(
        { ...config.env, ...identity?.env },
        agentFiles(config.env, identity?.runAs),
      ),
    async ready() {
      const version = await probe();
      if (!gateway) throw unavailable;
      return { bin: config.bin, version, credentials: gateway.source };
    },
    run(request, context, signal) {
      const run = (env: Record<string, string>, provider: CodexProvider, gateway: SandboxGateway) =>
        withRunFiles(config.env, request.identity, (files) =>
          runCodex(request, config, { env, provider, gateway }, context, signal, files),
        );
      if (!gateway) return failedCodexRun(new AgentNotAuthenticatedError(unavailable?.message));
      // A session's own are refused when it is made (options.ts); its key's cannot be enforced.
      if (request.toolRules.key.length > 0) {
        return failedCodexRun(
          new InvalidRunRequestError(
            "the key's policy has tool_rules, which codex exec has no hooks to enforce",
          ),
        );
      }
      return throughGateway(
        gateway,
        config.env,
        request,
        context,
        (env, access) =>
          run(env, { baseUrl: access.baseUrl, envKey: gateway.variable }, sandboxGateway(access)),
        (cause) => failedCodexRun(new AgentSpawnError(LABEL, cause)),
      );
    },
  };
}

/** A run that fails before codex starts: its one completion. */
async function* failedCodexRun(err: RunnerError): AsyncGenerator<BridgeEvent[]> {
  yield [new CodexMapper().failure(err.status, err.message, err.code, 0)];
}

/**
 * The thread's running totals before this run, as codex counts them (its input tokens include the
 * cached ones), from what the session's earlier runs recorded.
 */
async function totalsBefore(request: AgentRunRequest): Promise<CodexUsageTotals | undefined> {
  const used = await request.usageBefore();
  if (!used) return undefined;
  return {
    input_tokens: used.input_tokens + used.cache_read_tokens,
    cached_input_tokens: used.cache_read_tokens,
    cache_write_input_tokens: used.cache_creation_tokens,
    output_tokens: used.output_tokens,
    reasoning_output_tokens: 0,
  };
}

/** How this run's codex reaches its model: its environment, and the provider it is given. */
interface ModelRoute {
  env: Record<string, string>;
  /** The gateway, in place of the provider codex's config.toml selects. */
  provider: CodexProvider;
  /** The gateway as the run's sandbox reaches it. */
  gateway: SandboxGateway;
}

async function* runCodex(
  request: AgentRunRequest,
  config: CodexBackendConfig,
  model: ModelRoute,
  context: RunContext,
  signal: AbortSignal,
  files: RunFiles,
): AsyncGenerator<BridgeEvent[]> {
  const { settings, identity } = request;
  const threadId = request.agentSessionId ?? undefined;
  const startedAt = performance.now();
  const price = priceOf(config.prices, settings.model);
  const previousTotals = threadId ? await totalsBefore(request) : undefined;
  const mapper = new CodexMapper({
    ...(previousTotals ? { previousTotals } : {}),
    ...(price ? { price } : {}),
    elapsedMs: () => performance.now() - startedAt,
    resumed: threadId !== undefined,
    structured: request.outputSchema !== null,
  });
  const protocol: LineProtocol = {
    onLine: (line) => mapper.push(line),
    lineDropped: () => mapper.lineDropped(),
    failure: (err, elapsedMs) => mapper.failure(err.status, err.message, err.code, elapsedMs),
  };
  const images: string[] = [];
  let outputSchemaFile: string | undefined;
  try {
    for (const [i, image] of request.attachments.entries()) {
      const name = `image-${i + 1}.${imageExtension(image.mediaType)}`;
      images.push(await files.write(name, Buffer.from(image.data, "base64")));
    }
    if (request.outputSchema !== null) {
      outputSchemaFile = await files.write(
        "output-schema.json",
        JSON.stringify(request.outputSchema),
      );
    }
  } catch (err) {
    context.logger.error("could not write the run's files", { error: errorText(err) });
    yield [protocol.failure(new AgentSpawnError(LABEL, err as Error), 0)];
    return;
  }
  const developerInstructions = joinSystemPrompts(request);
  const sandboxing = codexSandboxing(
    SANDBOX_OF[settings.permissionMode] ?? "read-only",
    config.driver.sandbox !== undefined,
  );
  let args: string[];
  try {
    args = buildCodexArgs({
      sandbox: sandboxing.codexSandbox,
      ...(settings.model ? { model: settings.model } : {}),
      reasoningEffort: settings.effort,
      ...(developerInstructions ? { developerInstructions } : {}),
      ...(threadId ? { threadId } : {}),
      images,
      ...(outputSchemaFile ? { outputSchemaFile } : {}),
      provider: model.provider,
    });
  } catch (err) {
    const invalid =
      err instanceof RunnerError ? err : new InvalidRunRequestError(String((err as Error).message));
    yield [protocol.failure(invalid, 0)];
    return;
  }
  let cwd = request.cwd;
  if (settings.worktree) {
    try {
      cwd = await ensureSessionWorktree(request.git, request.sessionId, config.worktree);
    } catch (err) {
      context.logger.error("could not make the session's worktree", { error: errorText(err) });
      yield [protocol.failure(new WorktreeUnavailableError(), 0)];
      return;
    }
  }
  if (identity?.env.CODEX_HOME) {
    try {
      await seedTenantCodexHome(
        operatorCodexHome(config.env),
        identity.env.CODEX_HOME,
        agentFiles(config.env, identity.runAs),
      );
    } catch (err) {
      context.logger.error("could not copy the codex configuration into the tenant's home", {
        error: errorText(err),
      });
      yield [protocol.failure(new AgentSpawnError(LABEL, err as Error), 0)];
      return;
    }
  }
  const env = identity ? { ...model.env, ...identity.env } : model.env;
  const command: AgentCommand = {
    label: LABEL,
    bin: config.bin,
    args,
    // codex works where it starts: `exec resume` has no --cd.
    cwd,
    env,
    ...(identity ? { runAs: identity.runAs } : {}),
    // In a sandbox: its state (threads, logs), what git writes in the repository of a worktree
    // (objects, refs, the worktree's index), and the run's files (images, output schema).
    reach: {
      workDirReadOnly: sandboxing.workDirReadOnly,
      writable: [
        ...(env.CODEX_HOME ? [env.CODEX_HOME] : []),
        ...(settings.worktree && !sandboxing.workDirReadOnly ? [join(request.cwd, ".git")] : []),
      ],
      readOnly: [...images, ...(outputSchemaFile ? [outputSchemaFile] : [])].map((file) =>
        dirname(file),
      ),
      gateway: model.gateway,
    },
    input: request.prompt,
    closeInput: true,
  };
  const logger = context.logger.child({ codex_thread_id: threadId ?? null });
  yield* driveAgentProcess(command, protocol, { ...config.driver, ...context, logger }, signal);
}
