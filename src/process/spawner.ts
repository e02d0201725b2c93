import { type ChildProcess, fork } from "node:child_process";
import type { Socket } from "node:net";
import { fileURLToPath } from "node:url";
import { signalGroup } from "./groups.js";

// Starts processes through a small helper process (spawner-child.mjs says why), forked on first
// use and again after it is lost: a CLI with its pipes handed over, a short command run there to
// its end.

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

/** What is kept of an output past its bound: nothing (the command stopped), or its head or tail. */
export interface OutputBound {
  maxBytes: number;
  /** "stop": the command is stopped, and the output is null; "head": too, its first bytes kept. */
  over: "stop" | "head" | "tail";
}

/** A short command's bounds: it is stopped (its group killed) at the time limit. */
export interface WholeBounds {
  timeLimitMs: number;
  stdout: OutputBound;
  stderr: OutputBound;
}

/** A short command run to its end. */
export interface Ran {
  exit: ExitStatus;
  /** Null when past a "stop" bound. */
  stdout: Buffer | null;
  stderr: Buffer | null;
  /** An output was cut at a "head" bound (and the command stopped there). */
  cut: boolean;
  /** It was stopped at the time limit. */
  late: boolean;
}

export interface WholeOptions extends SpawnOptions {
  input?: string | Buffer | undefined;
}

type Stream = "stdin" | "stdout" | "stderr";

type Reply =
  | { id: number; error: { code?: string; message: string } }
  | { id: number; pid: number; stream: Stream }
  | { id: number; pid: number }
  | { id: number; exit: ExitStatus }
  | {
      id: number;
      ran: Omit<Ran, "stdout" | "stderr"> & Record<"stdout" | "stderr", Buffer[] | null>;
    };

type Rejects = (err: Error) => void;

interface RunningWhole {
  resolve: (ran: Ran) => void;
  reject: Rejects;
  /** Its group, once started: stopped here should the spawner be lost while it runs. */
  pid?: number;
}

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
  private readonly whole = new Map<number, RunningWhole>();

  spawn(bin: string, args: string[], options: SpawnOptions): Promise<SpawnedProcess> {
    return new Promise<SpawnedProcess>((resolve, reject) => {
      const id = this.nextId++;
      this.starting.set(id, { streams: {}, resolve, reject });
      this.send({ id, bin, args, ...options }, () => this.starting.delete(id), reject);
    });
  }

  run(bin: string, args: string[], options: WholeOptions, bounds: WholeBounds): Promise<Ran> {
    const { input, ...spawn } = options;
    return new Promise<Ran>((resolve, reject) => {
      const id = this.nextId++;
      this.whole.set(id, { resolve, reject });
      const whole = { ...bounds, input };
      this.send({ id, bin, args, ...spawn, whole }, () => this.whole.delete(id), reject);
    });
  }

  /** Sends `request`; when it cannot be sent, `forget` drops it and the caller's promise rejects. */
  private send(request: object, forget: () => void, reject: Rejects) {
    const failed = (err: Error) => {
      forget();
      this.updateRef();
      reject(err);
    };
    try {
      const helper = this.ensureHelper();
      this.updateRef();
      helper.send(request, (err) => err && failed(err));
    } catch (err) {
      // A helper that could not be forked (out of fds) has no channel.
      failed(err as Error);
    }
  }

  private ensureHelper(): ChildProcess {
    if (this.helper) return this.helper;
    // No environment of its own: what a CLI gets is sent with each request. Its stdin is a pipe
    // this process holds open and never writes to: its end tells the helper this process is gone.
    const helper = fork(helperPath, [], {
      env: {},
      execArgv: [],
      stdio: ["pipe", "ignore", "inherit", "ipc"],
      // A command's output comes back as bytes, not as text in JSON.
      serialization: "advanced",
    });
    // A failed send is reported to its caller; the exit below handles the rest.
    helper.on("error", () => {});
    // A fork that failed (out of file descriptors) has no channel and never exits: it is not
    // kept, and the next request forks again.
    if (!helper.connected) throw new Error("the process spawner could not be started");
    helper.on("message", (reply: Reply, handle: unknown) => this.receive(reply, handle, helper));
    helper.once("exit", () => this.lost(helper));
    // It must not keep the server's process alive by itself.
    helper.unref();
    this.helper = helper;
    return helper;
  }

  private receive(reply: Reply, handle: unknown, from: ChildProcess) {
    if ("ran" in reply) {
      const { stdout, stderr, ...ran } = reply.ran;
      this.whole.get(reply.id)?.resolve({
        ...ran,
        stdout: stdout && Buffer.concat(stdout),
        stderr: stderr && Buffer.concat(stderr),
      });
      this.whole.delete(reply.id);
      this.updateRef();
      return;
    }
    if ("exit" in reply) {
      this.running.get(reply.id)?.(reply.exit);
      this.running.delete(reply.id);
      this.updateRef();
      return;
    }
    if ("error" in reply) {
      const waiting = this.starting.get(reply.id) ?? this.whole.get(reply.id);
      this.starting.delete(reply.id);
      this.whole.delete(reply.id);
      this.updateRef();
      waiting?.reject(Object.assign(new Error(reply.error.message), { code: reply.error.code }));
      return;
    }
    if (!("stream" in reply)) {
      const whole = this.whole.get(reply.id);
      if (whole) whole.pid = reply.pid;
      // Read after its helper's loss was handled: its command is stopped as the others were.
      else if (from !== this.helper) stopLost(reply.pid);
      return;
    }
    const start = this.starting.get(reply.id);
    if (!start) return;
    start.streams[reply.stream] = handle as Socket;
    const { stdin, stdout, stderr } = start.streams;
    if (!stdin || !stdout || !stderr) return;
    this.starting.delete(reply.id);
    const exited = new Promise<ExitStatus>((resolve) => this.running.set(reply.id, resolve));
    start.resolve({ pid: reply.pid, stdin, stdout, stderr, exited });
  }

  /**
   * The helper died: nothing it started can be reported on any more, and the commands it ran to
   * their end, bounded by its timers, are stopped here.
   */
  private lost(helper: ChildProcess) {
    if (this.helper === helper) this.helper = undefined;
    for (const { pid } of this.whole.values()) if (pid !== undefined) stopLost(pid);
    for (const waiting of [...this.starting.values(), ...this.whole.values()])
      waiting.reject(new Error("the process spawner exited"));
    for (const exited of this.running.values()) exited({ code: null, signal: null });
    this.starting.clear();
    this.whole.clear();
    this.running.clear();
  }

  /** The IPC channel keeps the event loop alive only while a process is starting or running. */
  private updateRef() {
    const channel = this.helper?.channel;
    if (!channel) return;
    if (this.starting.size + this.running.size + this.whole.size > 0) channel.ref();
    else channel.unref();
  }
}

/** Stops the group of a command whose helper was lost, and with it its time limit. */
function stopLost(pgid: number) {
  try {
    signalGroup(pgid, "SIGKILL");
  } catch {
    // Not ours to signal any more: its pid went to another user's process.
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

/**
 * Runs `bin` to its end (in a process group of its own, `input` on its stdin), within `bounds`:
 * its output comes back whole, with no pipe of its own in this process.
 */
export function runProcess(
  bin: string,
  args: string[],
  options: WholeOptions,
  bounds: WholeBounds,
): Promise<Ran> {
  return spawner.run(bin, args, options, bounds);
}
