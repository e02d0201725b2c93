import { type ChildProcess, fork } from "node:child_process";
import type { Socket } from "node:net";
import { fileURLToPath } from "node:url";

// Starts CLI processes through a small helper process (spawner-child.mjs says why), forked on
// first use and again after it is lost.

export interface ExitStatus {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** A started process: its own group leader, with its three stdio pipes. */
export interface SpawnedProcess {
  pid: number;
  stdin: Socket;
  stdout: Socket;
  stderr: Socket;
  /** Resolves when it exits; if the spawner itself is lost first, with code and signal null. */
  exited: Promise<ExitStatus>;
}

export interface SpawnOptions {
  cwd: string;
  /** The process's complete environment. */
  env: Record<string, string>;
  /**
   * Real paths of directories the process gets open as its fds 3, 4, … (bubblewrap binds them by
   * fd): opened by the spawner, which refuses the start (`ELOOP`) when a link stands anywhere on
   * a path, so that a directory an agent can rename or replace is never followed elsewhere.
   */
  dirs?: string[];
}

type Stream = "stdin" | "stdout" | "stderr";

type Reply =
  | { id: number; error: { code?: string; message: string } }
  | { id: number; pid: number; stream: Stream }
  | { id: number; exit: ExitStatus };

interface Starting {
  streams: Partial<Record<Stream, Socket>>;
  resolve: (spawned: SpawnedProcess) => void;
  reject: (err: Error) => void;
}

const helperPath = fileURLToPath(new URL("./spawner-child.mjs", import.meta.url));

class Spawner {
  private helper: ChildProcess | undefined;
  private nextId = 1;
  private readonly starting = new Map<number, Starting>();
  private readonly running = new Map<number, (status: ExitStatus) => void>();

  spawn(bin: string, args: string[], options: SpawnOptions): Promise<SpawnedProcess> {
    const helper = this.ensureHelper();
    const id = this.nextId++;
    return new Promise<SpawnedProcess>((resolve, reject) => {
      this.starting.set(id, { streams: {}, resolve, reject });
      this.updateRef();
      const request = { id, bin, args, cwd: options.cwd, env: options.env, dirs: options.dirs };
      helper.send(request, (err) => {
        if (!err) return;
        this.starting.delete(id);
        this.updateRef();
        reject(err);
      });
    });
  }

  private ensureHelper(): ChildProcess {
    if (this.helper) return this.helper;
    // No environment of its own: what a CLI gets is sent with each request. Its stdin is a pipe
    // this process holds open and never writes to: its end tells the helper this process is gone.
    const helper = fork(helperPath, [], {
      env: {},
      execArgv: [],
      stdio: ["pipe", "ignore", "inherit", "ipc"],
      serialization: "json",
    });
    helper.on("message", (reply: Reply, handle: unknown) => this.receive(reply, handle));
    helper.once("exit", () => this.lost(helper));
    // A failed send is reported to its caller; the exit above handles the rest.
    helper.on("error", () => {});
    // It must not keep the server's process alive by itself.
    helper.unref();
    this.helper = helper;
    return helper;
  }

  private receive(reply: Reply, handle: unknown) {
    if ("exit" in reply) {
      this.running.get(reply.id)?.(reply.exit);
      this.running.delete(reply.id);
      this.updateRef();
      return;
    }
    const start = this.starting.get(reply.id);
    if (!start) return;
    if ("error" in reply) {
      this.starting.delete(reply.id);
      this.updateRef();
      start.reject(Object.assign(new Error(reply.error.message), { code: reply.error.code }));
      return;
    }
    start.streams[reply.stream] = handle as Socket;
    const { stdin, stdout, stderr } = start.streams;
    if (!stdin || !stdout || !stderr) return;
    this.starting.delete(reply.id);
    const exited = new Promise<ExitStatus>((resolve) => this.running.set(reply.id, resolve));
    start.resolve({ pid: reply.pid, stdin, stdout, stderr, exited });
  }

  /** The helper died: nothing it started can be reported on any more. */
  private lost(helper: ChildProcess) {
    if (this.helper === helper) this.helper = undefined;
    for (const start of this.starting.values())
      start.reject(new Error("the process spawner exited"));
    for (const exited of this.running.values()) exited({ code: null, signal: null });
    this.starting.clear();
    this.running.clear();
  }

  /** The IPC channel keeps the event loop alive only while a process is starting or running. */
  private updateRef() {
    const channel = this.helper?.channel;
    if (!channel) return;
    if (this.starting.size + this.running.size > 0) channel.ref();
    else channel.unref();
  }
}

const spawner = new Spawner();

/** Starts `bin` detached (in a process group of its own) with piped stdio. */
export function spawnProcess(
  bin: string,
  args: string[],
  options: SpawnOptions,
): Promise<SpawnedProcess> {
  return spawner.spawn(bin, args, options);
}
