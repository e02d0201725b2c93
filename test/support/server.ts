import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { readFileSync } from "node:fs";
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
 * How the entry point is run: "build" from the one-file bundle the run's global setup made
 * (./build.ts, faster to start), "npm-start" as `npm start` runs it, from the build in dist/
 * (which the global setup brought up to date as npm start's prestart does), for the README's curl
 * walk-through. One process either way: npm would put a parent in front of the server, and a
 * SIGKILL to that parent would leave the server running.
 */
export type Entry = "build" | "npm-start";

function entryArgs(entry: Entry): string[] {
  return entry === "build"
    ? [...TEST_NODE_FLAGS, join(inject("serverBuild"), "src/index.js")]
    : npmStartArgs();
}

/** The arguments `npm start` gives `node` (package.json's start script), with its Node flags. */
export function npmStartArgs(): string[] {
  const { scripts } = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
    scripts: { start: string };
  };
  const [node, ...args] = scripts.start.split(" ");
  if (node !== "node") throw new Error(`npm start runs ${node}, not node`);
  return args;
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

/**
 * The entry point as a child process, its stdout and stderr collected together (and apart), and
 * a wait for a pattern in that output.
 */
function spawnEntry(
  env: NodeJS.ProcessEnv,
  { ownGroup = false, entry = "build" }: StartOptions = {},
) {
  const child = spawn(process.execPath, entryArgs(entry), {
    cwd: root,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      // Node 22+ reuses the code an earlier start compiled, for the hundred-odd servers of a run
      // (docs/development.md); Node 20 ignores it.
      NODE_COMPILE_CACHE: join(inject("serverBuild"), "compile-cache"),
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
    detached: ownGroup,
  });
  let output = "";
  let stderr = "";
  let closed = false;
  // Each waiter looks again at every chunk, and once more when the pipes close.
  const waiters = new Set<() => void>();
  const changed = () => {
    for (const waiter of waiters) waiter();
  };
  child.stdout?.on("data", (d: Buffer) => {
    output += d;
    changed();
  });
  child.stderr?.on("data", (d: Buffer) => {
    output += d;
    stderr += d;
    changed();
  });
  // "close", not "exit": the pipes may still hold the last line when the process has exited.
  child.on("close", () => {
    closed = true;
    changed();
  });
  const waitForOutput = (pattern: RegExp, timeoutMs = 5000) =>
    new Promise<RegExpExecArray>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const settle = (outcome: () => void) => {
        waiters.delete(look);
        clearTimeout(timer);
        outcome();
      };
      const look = () => {
        const match = pattern.exec(output);
        if (match) settle(() => resolve(match));
        else if (closed)
          settle(() =>
            reject(
              new Error(
                `exited (${child.exitCode ?? child.signalCode}) without printing ${pattern}:\n${output}`,
              ),
            ),
          );
      };
      if (Number.isFinite(timeoutMs)) {
        timer = setTimeout(
          () => settle(() => reject(new Error(`no ${pattern} in the output:\n${output}`))),
          timeoutMs,
        );
      }
      waiters.add(look);
      look();
    });
  return { child, output: () => output, stderr: () => stderr, waitForOutput };
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
  // API keys off unless the test turns them on; a credential for the CLI, so that it is ready.
  const { child, output, waitForOutput } = spawnEntry(
    {
      AGENT_BRIDGE_AUTH: "none",
      // Test files run side by side, several instances each: within the server's connections.
      AGENT_BRIDGE_DB_POOL_SIZE: "4",
      // The tests' callback receivers listen on loopback, which callbacks may not reach otherwise.
      AGENT_BRIDGE_CALLBACK_ALLOW: LOOPBACK_CALLBACKS,
      ANTHROPIC_API_KEY: TEST_CLI_KEY,
      ...env,
      // The port the server binds, said in its "listening" line: a port picked here and then
      // released could be taken by another process before the server bound it.
      PORT: "0",
      HOST: "127.0.0.1",
    },
    opts,
  );
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
  // Ready once it says where it listens (after the database, the back-ends and the port), and
  // `/readyz` agrees.
  const listening = await waitForOutput(/agent-bridge listening on (http:\S+) /, 60_000).catch(
    (err: Error) => err,
  );
  if (listening instanceof Error) {
    await stop("SIGKILL");
    throw new Error(`server not ready: ${listening.message}`);
  }
  const url = listening[1] as string;
  const ready = await fetch(`${url}/readyz`).catch((err: Error) => err);
  if (ready instanceof Error || ready.status !== 200) {
    const said = ready instanceof Error ? ready.message : `${ready.status} ${await ready.text()}`;
    await stop("SIGKILL");
    throw new Error(`server not ready: /readyz ${said}\n${output()}`);
  }
  return { url, child, output, waitForOutput, stop, exited };
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
