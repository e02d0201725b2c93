import { type MockAnthropic, toolResultText } from "./mock-anthropic.js";

// Tests that have the real CLI's agent look around with a Bash command, as a hijacked agent would,
// mark each part of its output `== name`.

/** The sections of a command's output, each after its `== name` line. */
export function sections(output: string): Record<string, string> {
  const found: Record<string, string> = {};
  for (const part of output.split(/^== /m).slice(1)) {
    const [name = "", ...rest] = part.split("\n");
    found[name.trim()] = rest.join("\n");
  }
  return found;
}

/** What the Bash commands of the conversation that began with `prompt` printed, in order. */
export function commandOutput(mock: MockAnthropic, prompt: string): string {
  return mock
    .mainRequests()
    .filter((body) => JSON.stringify(body.messages).includes(prompt))
    .map(toolResultText)
    .filter(Boolean)
    .join("\n");
}
