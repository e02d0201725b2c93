import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

// Runs the `agent-bridge` bin as a child process, the way a user or a CI step does.

export const BIN = fileURLToPath(new URL("../../src/cli/bin.mjs", import.meta.url));
export const ROOT = fileURLToPath(new URL("../..", import.meta.url));

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function runCli(
  args: string[],
  env: NodeJS.ProcessEnv = {},
  input?: string,
): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => {
      stdout += d;
    });
    child.stderr.on("data", (d) => {
      stderr += d;
    });
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(input ?? "");
  });
}
