import { dirname } from "node:path";
import type { BridgeEvent } from "../../events.js";
import { errorText, silentLogger } from "../../log.js";
import type { AgentCommand, LineProtocol } from "../../process/driver/agent-command.js";
import { driveAgentProcess } from "../../process/driver/drive.js";
import type { DriverConfig } from "../../process/driver/driver-config.js";
import {
  AgentSpawnError,
  InvalidRunRequestError,
  RunCancelledError,
  RunnerError,
} from "../../process/errors.js";
import { withRunFiles } from "../../process/run-files.js";
import type { SandboxGateway } from "../../process/sandbox-gateway.js";
import { hasToolRules } from "../../tool-rules.js";
import type { RunContext } from "../agent.js";
import { isRecord } from "../line-fields.js";
import { buildClaudeArgs, userMessageLine } from "./command.js";
import { interruptRequestLine, permissionResponseLine, readControlRequest } from "./control.js";
import { parseClaudeLine } from "./delta-lines.js";
import { answerHookCallback, initializeRequestLine, readInitializeAnswer } from "./hooks.js";
import { CLAUDE_LONG_LINE } from "./long-line.js";
import { StreamMapper } from "./mapper.js";
import { withSessionFallback } from "./resume.js";
import type { RunRequest } from "./run-request.js";
import { readLine } from "./sdk-lines.js";
import { ClaudeSteering } from "./steering.js";
import {
  CLEAN_WORK_DIR_CALLBACK,
  callbackInput,
  isStopCallback,
  StopCheck,
  stopAnswerLine,
} from "./stop-check.js";

// Runs one `claude -p` for one message on the shared process driver (src/process/driver/): the
// command line and stdin message come from command.ts, the meaning of its stream-json lines from
// the mapper, and control requests (`--permission-prompt-tool stdio`) are answered on stdin,
// which therefore stays open until the run stops. Who answers a permission request is the run
// layer's business (RunContext.approve); without one, every request is refused.

export interface RunnerConfig
  extends DriverConfig,
    Partial<
      Pick<
        RunContext,
        "approve" | "withdraw" | "awaiting" | "interruption" | "answersQuestions" | "steer"
      >
    > {
  /** Path (or PATH name) of the claude binary. */
  bin: string;
  /** The child's complete environment (see env.ts `childEnvironment`). */
  env: Record<string, string>;
  /** Set: the CLI calls its API through the model gateway, which its sandbox reaches so. */
  gateway?: SandboxGateway;
}

export const LABEL = { name: "claude", binVariable: "AGENT_BRIDGE_CLAUDE_BIN" };

/**
 * One run; started again once with the other session flag when the CLI asks for it (resume.ts).
 * Its MCP configuration is a file of the run's, removed once the CLI is gone.
 */
export function runClaude(
  req: RunRequest,
  config: RunnerConfig,
  signal?: AbortSignal,
): AsyncGenerator<BridgeEvent[]> {
  const log = config.logger ?? silentLogger;
  return withRunFiles(config.env, req.identity, async function* (files) {
    let mcpConfigFile: string | undefined;
    if (req.mcpConfig !== undefined) {
      try {
        mcpConfigFile = await files.write("mcp.json", req.mcpConfig);
      } catch (err) {
        log.error("could not write the run's MCP configuration", { error: errorText(err) });
        yield* failedRun(new AgentSpawnError(LABEL, err as Error));
        return;
      }
    }
    const once = (r: RunRequest) => runClaudeOnce(r, mcpConfigFile, config, signal);
    yield* withSessionFallback(req, once, log);
  });
}

/** A run that fails before its CLI starts: its one completion. */
export async function* failedRun(err: RunnerError): AsyncGenerator<BridgeEvent[]> {
  yield [new StreamMapper().failure(err.status, err.message, err.code, 0)];
}

async function* runClaudeOnce(
  req: RunRequest,
  mcpConfigFile: string | undefined,
  config: RunnerConfig,
  signal?: AbortSignal,
): AsyncGenerator<BridgeEvent[]> {
  const logger = (config.logger ?? silentLogger).child({ claude_session_id: req.claudeSessionId });
  const startedAt = performance.now();
  const mapper = new StreamMapper({
    elapsedMs: () => performance.now() - startedAt,
    ...(req.ownBudget ? { ownBudget: true } : {}),
    resumed: req.resume,
    ...(config.answersQuestions ? { questionsByRequest: true } : {}),
  });
  const approve = config.approve ?? (async () => ({ behavior: "deny" as const }));
  // Requests the CLI withdrew: their answers, when they come, are not written.
  const withdrawn = new Set<string>();
  // A client's interrupt and a timeout's may both be asked: each its own request.
  let interrupts = 0;
  const interrupt = (write: (text: string) => void) =>
    write(interruptRequestLine(`interrupt-${++interrupts}-${req.claudeSessionId}`));
  // Input and switches from clients while the CLI runs; its own account of them is read here.
  const steering = new ClaudeSteering(req.claudeSessionId);
  const stopSteering = () => {
    steering.close();
    config.steer?.(null);
  };
  const rules = hasToolRules(req.toolRules) ? req.toolRules : undefined;
  const stopCheck = req.cleanWorkDir ? new StopCheck(req.cleanWorkDir, req.cwd, logger) : undefined;
  const protocol: LineProtocol = {
    onLine(line, reply) {
      const initialized = readInitializeAnswer(line);
      if (initialized) {
        mapper.describeCommands(initialized.commands);
        if (!rules || initialized.hooksApplied) return [];
        // The rules cannot be enforced: the run ends before the agent's first tool use.
        logger.error("the CLI did not take the hook that enforces the run's tool rules");
        interrupt(reply);
        return [
          {
            type: "status",
            message: "Stopped: the agent did not take the hook that enforces the tool rules",
          },
        ];
      }
      if (steering.consume(line)) return [];
      if (stopCheck && line.type === "control_request" && isRecord(line.request)) {
        if (isStopCallback(line.request)) {
          const requestId = String(line.request_id);
          stopCheck.answer(callbackInput(line.request)).then(
            (output) => reply(stopAnswerLine(requestId, output)),
            (err) => {
              logger.error("the clean stop check failed", { error: errorText(err) });
              reply(stopAnswerLine(requestId, {}));
            },
          );
          return [];
        }
      }
      if (line.type === "control_request" && isRecord(line.request)) {
        const hook = answerHookCallback(String(line.request_id), line.request, rules);
        if (hook) {
          reply(hook.line);
          return hook.event ? [hook.event] : [];
        }
      }
      if (line.type === "control_request") {
        const control = readControlRequest(line);
        if (!control) return [];
        if (control.kind === "unsupported") {
          reply(control.line);
          return [];
        }
        const { request } = control;
        if (config.answersQuestions && request.questions.length > 0 && request.toolUseId) {
          const parent = mapper.questionRequested(request.toolUseId);
          if (parent !== null) request.parentToolUseId = parent;
        }
        approve(request).then(
          (answer) => {
            if (!withdrawn.has(request.requestId)) reply(permissionResponseLine(request, answer));
          },
          (err) => {
            logger.error("answering a permission request failed", { error: errorText(err) });
            reply(permissionResponseLine(request, { behavior: "deny" }));
          },
        );
        // A question the run layer does not stream itself (answersQuestions) is the mapper's.
        const question =
          !config.answersQuestions && request.questions.length > 0 && request.toolUseId !== null
            ? mapper.questionFromControl(request.toolUseId, request.questions)
            : undefined;
        return question ? [question] : [];
      }
      if (line.type === "control_cancel_request") {
        const cancel = readLine(line);
        if (cancel.type === "control_cancel_request") {
          withdrawn.add(cancel.request_id);
          config.withdraw?.(cancel.request_id);
        }
        return [];
      }
      const events = mapper.push(line);
      const last = events.at(-1);
      if (last?.type !== "completion") return events;
      // A result: the run's last, unless input waits for a turn of its own (steering.ts).
      if (steering.endsAt(last, interrupts > 0)) {
        config.steer?.(null);
        events[events.length - 1] = steering.finish(last);
        return events;
      }
      mapper.nextTurn();
      return events.slice(0, -1);
    },
    handsOverFirst: (line) => line.type === "control_request",
    lineDropped: () => mapper.lineDropped(),
    failure: (err, elapsedMs) => {
      stopSteering();
      return steering.finish(mapper.failure(err.status, err.message, err.code, elapsedMs));
    },
    ...(config.awaiting ? { awaiting: config.awaiting } : {}),
    started(write) {
      steering.attach(write);
      config.steer?.(steering);
      const { interruption } = config;
      const ask = () => interrupt(write);
      if (interruption?.aborted) ask();
      else interruption?.addEventListener("abort", ask, { once: true });
    },
    interrupt,
  };
  if (stopCheck) withStopChecks(protocol, stopCheck);
  // Cancelled before its CLI started: it is not started to be interrupted.
  if (config.interruption?.aborted) {
    yield [protocol.failure(new RunCancelledError(), 0)];
    return;
  }
  let args: string[];
  try {
    args = buildClaudeArgs({ ...req, ...(mcpConfigFile ? { mcpConfigFile } : {}) });
  } catch (err) {
    const invalid =
      err instanceof RunnerError ? err : new InvalidRunRequestError(String((err as Error).message));
    yield [protocol.failure(invalid, 0)];
    return;
  }
  const env = req.identity ? { ...config.env, ...req.identity.env } : config.env;
  const command: AgentCommand = {
    label: LABEL,
    bin: config.bin,
    args,
    cwd: req.cwd,
    env,
    ...(req.identity ? { runAs: req.identity.runAs } : {}),
    // In a sandbox: the CLI's state where the operator moved it, the run's MCP configuration, and
    // the session's extra directories, writable as its work dir is.
    reach: {
      writable: env.CLAUDE_CONFIG_DIR ? [env.CLAUDE_CONFIG_DIR] : [],
      ...(req.addDirs?.length ? { extraDirs: [...req.addDirs] } : {}),
      readOnly: mcpConfigFile ? [dirname(mcpConfigFile)] : [],
      ...(config.gateway ? { gateway: config.gateway } : {}),
    },
    // The hooks first (hooks.ts): the CLI answers before it reads the prompt.
    input:
      initializeRequestLine(rules, stopCheck ? CLEAN_WORK_DIR_CALLBACK : undefined) +
      userMessageLine(req.prompt, req.attachments),
    closeInput: false,
    longLine: CLAUDE_LONG_LINE,
    parseLine: parseClaudeLine,
  };
  try {
    yield* driveAgentProcess(command, protocol, { ...config, logger }, signal);
  } finally {
    stopSteering();
  }
}

/**
 * The Stop hook's checks are answered later than their line: their events go before the CLI's
 * next line's, and its last completion says whether the agent stopped with changes all the same.
 */
function withStopChecks(protocol: LineProtocol, stopCheck: StopCheck): void {
  const onLine = protocol.onLine.bind(protocol);
  protocol.onLine = (line, reply) => {
    const events = [...stopCheck.drain(), ...onLine(line, reply)];
    const last = events.at(-1);
    if (last?.type === "completion" && stopCheck.dirty !== undefined) {
      events[events.length - 1] = { ...last, work_dir_dirty: stopCheck.dirty };
    }
    return events;
  };
}
