import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { createServer } from "node:net";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { inject } from "vitest";
import { TEST_CLI_KEY } from "./claude-env.js";
import { TEST_NODE_FLAGS } from "./node-flags.js";

// The service as a real process (`npm start` runs the same entry point), for what only a real
// process shows: start-up, restarts, signals.

const root = fileURLToPath(new URL("../..", import.meta.url));

/**
 * How the entry point is run: "build" from the JavaScript the run's global setup compiled (a
 * second faster to start), "npm-start" as `npm start` runs it, through tsx's loader, for the
 * README's curl walk-through. One process either way: the `tsx` CLI would put a parent in front of the
 * server, and a SIGKILL to that parent would leave the server running.
 */
export type Entry = "build" | "npm-start";

function entryArgs(entry: Entry): string[] {
  return entry === "build"
    ? [...TEST_NODE_FLAGS, join(inject("serverBuild"), "src/index.js")]
    : ["--import", "tsx", "src/index.ts"];
}

/** AGENT_BRIDGE_CALLBACK_ALLOW for the tests' callback receivers, which listen on loopback. */
export const LOOPBACK_CALLBACKS = "127.0.0.1/32,::1/128";

export interface ServerProcess {
  url: string;
  child: ChildProcess;
  output(): string;
  /** Resolves with the match once the process has printed it (its output may lag its HTTP). */
  waitForOutput(pattern: RegExp, timeoutMs?: number): Promise<RegExpExecArray>;
  /** Sends the signal and waits for the process to exit; returns its exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  /** Resolves with its exit code once the process has exited. */
  exited: Promise<number | null>;
}

export async function freePort(): Promise<number> {
  const server = createServer().listen(0, "127.0.0.1");
  await once(server, "listening");
  const address = server.address();
  server.close();
  if (!address || typeof address === "string") throw new Error("no port");
  return address.port;
}

/** The entry point as a child process, its stdout and stderr collected together (and apart). */
function spawnEntry(
  env: NodeJS.ProcessEnv,
  { ownGroup = false, entry = "build" }: StartOptions = {},
): { child: ChildProcess; output: () => string; stderr: () => string } {
  const child = spawn(process.execPath, entryArgs(entry), {
    cwd: root,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      // Node 22+ reuses the code an earlier start compiled, for the hundred-odd servers of a run
      // (README "Development"); Node 20 ignores it.
      NODE_COMPILE_CACHE: join(inject("serverBuild"), "compile-cache"),
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
    detached: ownGroup,
  });
  let output = "";
  let stderr = "";
  const collect = (d: Buffer) => {
    output += d;
  };
  child.stdout?.on("data", collect);
  child.stderr?.on("data", collect);
  child.stderr?.on("data", (d: Buffer) => {
    stderr += d;
  });
  return { child, output: () => output, stderr: () => stderr };
}

export interface StartOptions {
  /**
   * In a process group of its own (pgid = its pid), as a terminal or a service manager starts it,
   * for signals to the whole group.
   */
  ownGroup?: boolean;
  entry?: Entry;
}

/** Starts the service and waits until it is ready. */
export async function startServer(
  env: NodeJS.ProcessEnv,
  opts: StartOptions = {},
): Promise<ServerProcess> {
  // Without either the server opens its default data dir, ./.agent-bridge, in the checkout.
  if (!env.DATABASE_URL && !env.AGENT_BRIDGE_DATA_DIR) {
    throw new Error("a test server needs a database of its own: DATABASE_URL or a data dir");
  }
  const port = await freePort();
  // API keys off unless the test turns them on; a credential for the CLI, so that it is ready.
  const { child, output } = spawnEntry(
    {
      AGENT_BRIDGE_AUTH: "none",
      // Test files run side by side, several instances each: within the server's connections.
      AGENT_BRIDGE_DB_POOL_SIZE: "4",
      // The tests' callback receivers listen on loopback, which callbacks may not reach otherwise.
      AGENT_BRIDGE_CALLBACK_ALLOW: LOOPBACK_CALLBACKS,
      ANTHROPIC_API_KEY: TEST_CLI_KEY,
      ...env,
      PORT: String(port),
      HOST: "127.0.0.1",
    },
    opts,
  );
  const url = `http://127.0.0.1:${port}`;
  const exited = once(child, "exit").then(() => child.exitCode);
  const stopBoundMs = (Number(env.AGENT_BRIDGE_SHUTDOWN_GRACE_SECONDS ?? 30) + 30) * 1000;
  const stop = async (signal: NodeJS.Signals = "SIGTERM") => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    // A server that does not stop is a failure that says what it printed, not a hook timeout:
    // it has its shutdown grace for its runs, and takes well under a second besides, but up to
    // 10 s to close open connections and the database, and more on a loaded machine (a step
    // that takes over 3 s is named in its output).
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<"late">((resolve) => {
      timer = setTimeout(() => resolve("late"), stopBoundMs);
    });
    const code = await Promise.race([exited, late]);
    clearTimeout(timer);
    if (code !== "late") return code;
    child.kill("SIGKILL");
    await exited;
    throw new Error(
      `server did not exit within ${stopBoundMs / 1000} s of ${signal}:\n${output().slice(-8000)}`,
    );
  };
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null)
      throw new Error(`server exited with ${child.exitCode}:\n${output()}`);
    try {
      if ((await fetch(`${url}/readyz`)).status === 200) {
        return { url, child, output, waitForOutput: waitFor(output), stop, exited };
      }
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  await stop("SIGKILL");
  throw new Error(`server not ready within 60 s:\n${output()}`);
}

function waitFor(output: () => string) {
  return async (pattern: RegExp, timeoutMs = 5000): Promise<RegExpExecArray> => {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const match = pattern.exec(output());
      if (match) return match;
      if (Date.now() > until) throw new Error(`no ${pattern} in the output:\n${output()}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
}

/** Runs the entry point to its exit, for start-up failures. */
export async function runServerToExit(
  env: NodeJS.ProcessEnv,
): Promise<{ code: number | null; output: string; stderr: string }> {
  const { child, output, stderr } = spawnEntry(env);
  // "close", not "exit": the pipes may still hold the last line when the process has exited.
  const [code] = await once(child, "close");
  return { code, output: output(), stderr: stderr() };
}
