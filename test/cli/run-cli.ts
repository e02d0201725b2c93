import { Writable } from "node:stream";
import { fileURLToPath } from "node:url";
import { main } from "../../src/cli/main.js";
import { type CommandResult, runCommand } from "../support/process.js";

// Runs the `agent-bridge` command line: as a child process, the way a user or a CI step does
// (for what only a process shows: stdin, signals, a closed pipe, the environment), or in this
// process through its exported `main`, which spares a Node start and tsx's compile per command.

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

/** The command line run in-process on `args`, with its stdout and stderr captured. */
export function cli(...args: string[]): Promise<CommandResult> {
  return cliWithEnv(args, {});
}

/**
 * The command line run in-process with `env` added to the environment for the call (the
 * commands read their configuration from process.env): callers await one call before the next.
 */
export async function cliWithEnv(
  args: string[],
  env: Record<string, string>,
): Promise<CommandResult> {
  const saved = Object.keys(env).map((name) => [name, process.env[name]] as const);
  Object.assign(process.env, env);
  const stdout = capture();
  const stderr = capture();
  try {
    const code = await main([process.execPath, BIN, ...args], {
      stdout: stdout.stream,
      stderr: stderr.stream,
    });
    return { code, stdout: stdout.text(), stderr: stderr.text() };
  } finally {
    for (const [name, value] of saved) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  }
}

function capture(): { stream: Writable; text(): string } {
  let text = "";
  const stream = new Writable({
    decodeStrings: false,
    write(chunk: string | Buffer, _encoding, done) {
      text += chunk;
      done();
    },
  });
  return { stream, text: () => text };
}
