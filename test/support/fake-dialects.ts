import {
  assistant,
  messageStart,
  result,
  streamEvent,
  systemInit,
  textDelta,
  toolResult,
  toolUse,
  toolUseStart,
} from "./stream-json-lines.js";

// The fake CLI's agent steps, which say what the agent does without saying how its CLI prints it,
// and the lines each dialect prints for them: `claude` (stream-json, as Claude Code 2.1 writes it)
// and `codex` (`codex exec --json`, as codex-cli 0.171 writes it; test/fixtures/codex/README.md).
// A scenario made of agent steps runs on either back-end.

export type Dialect = "claude" | "codex";

export interface AgentUsage {
  input: number;
  output: number;
}

export type AgentStep =
  /** The CLI's session (thread) starts: claude's `system init`, codex's `thread.started`. */
  | { init: true }
  /**
   * The agent's reply, as its CLI streams it: claude sends each part as a text delta
   * (`delayMs` apart), codex the whole message at once (after the same time).
   */
  | { reply: { parts: string[]; delayMs?: number } }
  /** A shell command the agent runs, and what it printed. */
  | { shell: { command: string; output: string } }
  /** The turn ends well with this usage (claude also reports `costUsd` and a message uuid). */
  | { succeed: { usage?: AgentUsage; costUsd?: number; uuid?: string } }
  /** The turn fails with this message. */
  | { fail: string };

/** A dialect's own steps for the fake CLI (fake-cli.mjs plays them). */
export type DialectStep =
  | { emit: Record<string, unknown> }
  | { sleep: number }
  | { codexThreadStarted: true }
  /** Waits until stdin closes (codex reads the whole prompt first). */
  | { waitStdinEnd: true }
  /** codex's running totals: the fake adds this turn's share to its thread's earlier turns. */
  | { codexTurnCompleted: Record<string, number> };

const DEFAULT_USAGE: AgentUsage = { input: 100, output: 20 };
/** Cached input tokens each turn reports besides `input`. */
const CACHE_READ = 3;
const CACHE_WRITE = 2;

function isAgentStep(step: object): step is AgentStep {
  return ["init", "reply", "shell", "succeed", "fail"].some((key) => key in step);
}

/** A scenario's steps with its agent steps as lines of `dialect`, its other steps as they are. */
export function dialectSteps<T extends object>(
  dialect: Dialect,
  steps: (AgentStep | T)[],
): (DialectStep | T)[] {
  return dialect === "claude" ? claudeSteps(steps) : codexSteps(steps);
}

function claudeSteps<T extends object>(steps: (AgentStep | T)[]): (DialectStep | T)[] {
  const out: (DialectStep | T)[] = [];
  // The reply's text so far: claude repeats it in its assistant message and its result.
  let said = "";
  let message = 0;
  for (const step of steps) {
    if (!isAgentStep(step)) out.push(step);
    else if ("init" in step) out.push({ emit: systemInit() });
    else if ("reply" in step) {
      const id = `msg_${++message}`;
      out.push(
        { emit: messageStart(id) },
        {
          emit: streamEvent(id, {
            type: "content_block_start",
            index: 0,
            content_block: { type: "text", text: "" },
          }),
        },
      );
      for (const part of step.reply.parts) {
        if (step.reply.delayMs) out.push({ sleep: step.reply.delayMs });
        out.push({ emit: textDelta(id, 0, part) });
      }
      said += step.reply.parts.join("");
    } else if ("shell" in step) {
      const id = `msg_${++message}`;
      const toolId = `toolu_${message}`;
      out.push(
        { emit: messageStart(id) },
        { emit: toolUseStart(id, 0, toolId, "Bash") },
        {
          emit: assistant(id, [toolUse(toolId, "Bash", { command: step.shell.command })]),
        },
        { emit: toolResult(toolId, step.shell.output) },
      );
    } else if ("succeed" in step) {
      const usage = step.succeed.usage ?? DEFAULT_USAGE;
      out.push(
        {
          emit: assistant(`msg_${message}`, [{ type: "text", text: said }], {
            uuid: step.succeed.uuid ?? "assistant-uuid-1",
          }),
        },
        {
          emit: result({
            result: said,
            total_cost_usd: step.succeed.costUsd ?? 0.01,
            usage: {
              input_tokens: usage.input,
              output_tokens: usage.output,
              cache_read_input_tokens: CACHE_READ,
              cache_creation_input_tokens: CACHE_WRITE,
            },
          }),
        },
      );
    } else {
      out.push({
        emit: result({ is_error: true, result: step.fail, total_cost_usd: 0 }),
      });
    }
  }
  return out;
}

function codexSteps<T extends object>(steps: (AgentStep | T)[]): (DialectStep | T)[] {
  const out: (DialectStep | T)[] = [];
  let item = 0;
  for (const step of steps) {
    if (!isAgentStep(step)) out.push(step);
    else if ("init" in step)
      out.push(
        { waitStdinEnd: true },
        { codexThreadStarted: true },
        { emit: { type: "turn.started" } },
      );
    else if ("reply" in step) {
      const { parts, delayMs } = step.reply;
      if (delayMs) out.push({ sleep: delayMs * parts.length });
      out.push({
        emit: {
          type: "item.completed",
          item: { id: `item_${item++}`, type: "agent_message", text: parts.join("") },
        },
      });
    } else if ("shell" in step) {
      const command = {
        id: `item_${item++}`,
        type: "command_execution",
        command: `/bin/bash -lc '${step.shell.command}'`,
      };
      out.push(
        {
          emit: {
            type: "item.started",
            item: { ...command, aggregated_output: "", exit_code: null, status: "in_progress" },
          },
        },
        {
          emit: {
            type: "item.completed",
            item: {
              ...command,
              aggregated_output: step.shell.output,
              exit_code: 0,
              status: "completed",
            },
          },
        },
      );
    } else if ("succeed" in step) {
      const usage = step.succeed.usage ?? DEFAULT_USAGE;
      out.push({
        codexTurnCompleted: {
          // OpenAI counts the cached input tokens in input_tokens.
          input_tokens: usage.input + CACHE_READ,
          cached_input_tokens: CACHE_READ,
          cache_write_input_tokens: CACHE_WRITE,
          output_tokens: usage.output,
          reasoning_output_tokens: 0,
        },
      });
    } else {
      out.push(
        { emit: { type: "error", message: step.fail } },
        { emit: { type: "turn.failed", error: { message: step.fail } } },
      );
    }
  }
  return out;
}

/** The text of each `text_delta` a reply of `parts` gives in `dialect`. */
export function replyDeltas(dialect: Dialect, parts: string[]): string[] {
  return dialect === "claude" ? parts : [parts.join("")];
}
