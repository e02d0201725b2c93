import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { once } from "node:events";
import { resolve } from "node:path";
import { createInterface } from "node:readline";
import { freePort, npmStartArgs } from "../test/support/server.js";

// The server as `npm start` runs it (its build, then the built server as one Node process, so its
// pid is the server's own), with room for extra Node flags such as --cpu-prof, which NODE_OPTIONS
// does not accept.

const root = resolve(import.meta.dirname, "..");

export interface BenchServer {
  url: string;
  child: ChildProcess;
  output(): string;
  /** From its spawn to its first 200 on /healthz. */
  startMs: number;
  stop(): Promise<void>;
}

export async function startBenchServer(
  env: Record<string, string>,
  nodeFlags: string[] = [],
): Promise<BenchServer> {
  const port = await freePort();
  // npm start's prestart.
  execFileSync(process.execPath, ["scripts/build.mjs"], { cwd: root, stdio: "inherit" });
  const started = performance.now();
  // The caller's flags after npm start's own, so that theirs win (V8 takes a flag's last value).
  const start = npmStartArgs();
  const child = spawn(process.execPath, [...start.slice(0, -1), ...nodeFlags, ...start.slice(-1)], {
    cwd: root,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      ...env,
      PORT: String(port),
      HOST: "127.0.0.1",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const keep = (d: Buffer) => {
    output = (output + d.toString()).slice(-20_000);
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  const exited = once(child, "exit");
  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    await exited;
  };
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null)
      throw new Error(`server exited with ${child.exitCode}:\n${output}`);
    try {
      if ((await fetch(`${url}/healthz`)).status === 200)
        return { url, child, output: () => output, startMs: performance.now() - started, stop };
    } catch {
      // not listening yet
    }
    // Often enough for the start-up time to be told within a few milliseconds.
    await new Promise((r) => setTimeout(r, 5));
  }
  await stop();
  throw new Error(`server not ready within 60 s:\n${output}`);
}

export interface BenchUpstream {
  url: string;
  /** How many calls came with each credential (`x-api-key`, else `authorization`, else "none"). */
  credentials(): Promise<Record<string, number>>;
  stop(): Promise<void>;
}

/** The bench's Messages API (bench/upstream.mjs), in a process of its own. */
export async function startBenchUpstream(): Promise<BenchUpstream> {
  const child = spawn(process.execPath, [resolve(root, "bench", "upstream.mjs")], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const exited = once(child, "exit");
  const [first] = (await once(child.stdout ?? child, "data")) as [Buffer];
  const port = /^listening (\d+)/.exec(first.toString())?.[1];
  if (!port) throw new Error(`bench upstream: ${first.toString()}`);
  const url = `http://127.0.0.1:${port}`;
  return {
    url,
    credentials: async () => (await (await fetch(`${url}/stats`)).json()) as Record<string, number>,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      await exited;
    },
  };
}

/** One query of the SDK peer (bench/sdk-peer.mjs); times from its `query()` call. */
export interface SdkRun {
  firstDeltaMs: number | null;
  resultMs: number | null;
  /** The `result` message's subtype. */
  result: string | null;
  messages: number;
  deltas: number;
  assistants: number;
}

export interface SdkBatch {
  runs: SdkRun[];
  /** From the queries' start to the last `result`. */
  wallMs: number;
  /** The peer process's own CPU (not the stand-in CLI's), over the batch and its settle. */
  cpuMs: number;
}

export interface SdkPeer {
  pid: number;
  /** `count` queries of `prompt` at once; CPU counted until `settleMs` after the last ended. */
  run(prompt: string, count?: number, settleMs?: number): Promise<SdkBatch>;
  stop(): Promise<void>;
}

/** The Agent SDK's `query()` loop in a Node process of its own, driving the stand-in CLI `bin`. */
export function startSdkPeer(bin: string): SdkPeer {
  const child = spawn(process.execPath, [resolve(root, "bench", "sdk-peer.mjs"), bin], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const exited = once(child, "exit");
  const pending: { resolve(b: SdkBatch): void; reject(e: Error): void }[] = [];
  const lines = createInterface({ input: child.stdout });
  lines.on("line", (line) => pending.shift()?.resolve(JSON.parse(line) as SdkBatch));
  child.on("exit", (code, signal) => {
    for (const p of pending.splice(0)) p.reject(new Error(`SDK peer exited: ${code ?? signal}`));
  });
  return {
    pid: child.pid ?? 0,
    run: (prompt, count = 1, settleMs = 0) =>
      new Promise((resolve, reject) => {
        pending.push({ resolve, reject });
        child.stdin.write(`${JSON.stringify({ prompt, count, settleMs })}\n`);
      }),
    stop: async () => {
      child.stdin.end();
      await exited;
    },
  };
}
