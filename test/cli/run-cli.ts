import { fileURLToPath } from "node:url";
import { type CommandResult, runCommand } from "../support/process.js";

// Runs the `agent-bridge` bin as a child process, the way a user or a CI step does.

export const BIN = fileURLToPath(new URL("../../src/cli/bin.mjs", import.meta.url));
export const ROOT = fileURLToPath(new URL("../..", import.meta.url));

export function runCli(
  args: string[],
  env: NodeJS.ProcessEnv = {},
  input?: string,
): Promise<CommandResult> {
  return runCommand(process.execPath, [BIN, ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
    input,
  });
}
