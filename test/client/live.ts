import { createTestApp, listen, type TestApp } from "../support/app.js";
import type { Backend } from "../support/db.js";
import { type FakeCli, type FakeScenario, fakeCli } from "../support/fake-cli.js";
import {
  assistant,
  messageStart,
  result,
  systemInit,
  textDelta,
  toolResult,
  toolUse,
  toolUseStart,
} from "../support/stream-json-lines.js";

// The real app served on loopback with the scripted fake CLI: what the client and the command
// line talk to in their tests.

export interface LiveServer {
  url: string;
  app: TestApp;
  fake: FakeCli;
  close(): Promise<void>;
}

export async function liveServer(backend: Backend, scenario: FakeScenario): Promise<LiveServer> {
  const fake = await fakeCli(scenario);
  const app = await createTestApp(backend, {
    ...fake.bridgeEnv,
  });
  const server = await listen(app.app);
  return {
    url: server.url,
    app,
    fake,
    close: async () => {
      await server.close();
      await app.close();
      await fake.cleanup();
    },
  };
}

/** Runs a Bash tool, then answers `parts` (streamed), then succeeds. */
export function toolThenReply(parts: string[]): FakeScenario {
  const text = parts.join("");
  return {
    steps: [
      { emit: systemInit() },
      { emit: messageStart("msg_1") },
      { emit: toolUseStart("msg_1", 0, "toolu_1", "Bash") },
      { emit: assistant("msg_1", [toolUse("toolu_1", "Bash", { command: "ls" })]) },
      { emit: toolResult("toolu_1", "README.md") },
      { emit: messageStart("msg_2") },
      ...parts.map((part) => ({ emit: textDelta("msg_2", 0, part) })),
      { emit: assistant("msg_2", [{ type: "text", text }]) },
      {
        emit: result({
          result: text,
          total_cost_usd: 0.0123,
          duration_ms: 1500,
          usage: {
            input_tokens: 100,
            output_tokens: 20,
            cache_read_input_tokens: 0,
            cache_creation_input_tokens: 0,
          },
        }),
      },
    ],
  };
}

/** Starts, then exits with code 3 before any result. */
export function crashBeforeResult(): FakeScenario {
  return { steps: [{ emit: systemInit() }, { stderr: "boom: out of cheese\n" }, { exit: 3 }] };
}
