import type { AgentName } from "../../src/agents/registry.js";
import { makeClaudeEnv } from "./claude-env.js";
import { makeCodexEnv } from "./codex-env.js";
import { startMockAnthropic } from "./mock-anthropic.js";
import { shellCall, startMockOpenAI } from "./mock-openai.js";

// The real CLI of an agent against a mock of its model's API on loopback, set up once for the
// run-level tests of both back-ends: claude against mock-anthropic.ts, codex against mock-openai.ts.

export interface Model {
  agent: AgentName;
  /** The bridge's configuration that runs this agent's real CLI against the mock. */
  env: Record<string, string>;
  /** The work dir the runs get. */
  cwd: string;
  /**
   * Queues the answer to the next model request: the messages `texts`, streamed with `delayMs`
   * between the API's events. (claude streams each text as deltas; codex shows each message whole.)
   */
  answer(texts: string[], options?: { delayMs?: number; hold?: () => Promise<unknown> }): void;
  /** What the latest model request carried (its messages, as JSON), to look for earlier turns. */
  lastRequest(): string;
  /** Queues a turn in which the model runs `command` with the agent's shell tool. */
  shell(command: string): void;
  close(): Promise<void>;
}

export async function startModel(
  agent: AgentName,
  options: { defaultText?: string } = {},
): Promise<Model> {
  const mockOptions = { quiet: true, ...options };
  if (agent === "claude") {
    const mock = await startMockAnthropic(mockOptions);
    const ce = await makeClaudeEnv(mock.url);
    return {
      agent,
      env: { ...ce.env, AGENT_BRIDGE_WORK_DIR: ce.cwd },
      cwd: ce.cwd,
      answer: (texts, options = {}) =>
        mock.script({ blocks: texts.map((text) => ({ type: "text" as const, text })), ...options }),
      lastRequest: () => JSON.stringify(mock.mainRequests().at(-1)?.messages),
      shell: (command) =>
        mock.script({ blocks: [{ type: "tool_use", name: "Bash", input: { command } }] }),
      close: async () => {
        await mock.close();
        await ce.cleanup();
      },
    };
  }
  const mock = await startMockOpenAI(mockOptions);
  const ce = await makeCodexEnv(mock.url);
  return {
    agent,
    env: { ...ce.env, AGENT_BRIDGE_AGENT: "codex", AGENT_BRIDGE_WORK_DIR: ce.cwd },
    cwd: ce.cwd,
    answer: (texts, options = {}) =>
      mock.script({
        output: texts.map((text) => ({ type: "message" as const, text })),
        ...options,
      }),
    lastRequest: () => JSON.stringify(mock.responsesRequests().at(-1)?.input),
    shell: (command) => mock.script({ output: [shellCall(command)] }),
    close: async () => {
      await mock.close();
      await ce.cleanup();
    },
  };
}
