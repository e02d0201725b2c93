import { stat } from "node:fs/promises";
import type { BridgeEvent, CompletionEvent } from "../events.js";
import { type Logger, silentLogger } from "../log.js";
import { commandAs } from "./agent-user.js";
import {
  AgentExitError,
  type AgentLabel,
  AgentNoResultError,
  AgentNotFoundError,
  AgentSpawnError,
  AgentStalledError,
  AgentTimeoutError,
  RunCancelledError,
  type RunLimitError,
  RunnerError,
  WorkDirNotFoundError,
} from "./errors.js";
import { type LongLine, NdjsonReader } from "./framer.js";
import { ByteTail, terminateGroup } from "./groups.js";
import type { RunCgroup, RunLimits } from "./run-limits.js";
import type { Launch, Sandbox, SandboxedCommand } from "./sandbox.js";
import { type SpawnedProcess, spawnProcess } from "./spawner.js";

// Drives one agent CLI process for one run, whatever the agent: starts it in its own process
// group, writes its input, frames its stdout into JSON lines for the back-end's protocol, and
// yields the protocol's BridgeEvents in batches (what the CLI wrote while the consumer was busy
// with the previous batch), ending with exactly one `completion` whatever happens. The read loop
// stops at the protocol's completion (not at EOF, which a grandchild holding stdout could delay
// forever).
//
// At a timeout or a stall a CLI that can be asked (the protocol's `interrupt`) is asked to end its
// turn first, as a client's interrupt does, so that its result reports what the run spent; the
// run still ends timed out (stalled), with that spend. One that has not answered within
// `killGraceMs` is stopped as one that cannot be asked is at once.
//
// The completion's batch is yielded as soon as the outcome is known (the CLI's own, a timeout, a
// stall, a cancel, the process's end), and stopping the group starts just before it: stdin closes
// (after its outcome a CLI exits by itself), then SIGTERM, `killGraceMs`, SIGKILL. The generator's
// return, whether the consumer asks for the next item or calls return() (also early), resolves
// only once the group is gone: a consumer that holds the run's slot until then never has two CLIs
// in one slot.

/** The command of one run: what it starts (SandboxedCommand), and what it is told on stdin. */
export interface AgentCommand extends SandboxedCommand {
  label: AgentLabel;
  /** Written to stdin once the process runs. */
  input: string;
  /**
   * Whether stdin closes after the input (a CLI that reads its prompt to EOF); otherwise it stays
   * open for the protocol's replies until the run stops.
   */
  closeInput: boolean;
  /** How the CLI's long stdout lines are cut (its plugin's); absent: kept whole up to the bound. */
  longLine?: LongLine;
}

/** A back-end's side of the conversation: what its CLI's lines mean. */
export interface LineProtocol {
  /**
   * The events of one stdout line; a `completion` among them is the CLI's outcome and ends the
   * read loop. `reply` writes to the CLI's stdin (control answers).
   */
  onLine(line: Record<string, unknown>, reply: (text: string) => void): BridgeEvent[];
  /** A line over the size bound was dropped (its events are missing). */
  lineDropped(): void;
  /** The completion of a run that ended without the CLI's own outcome. */
  failure(err: RunnerError, elapsedMs: number): CompletionEvent;
  /** Whether the CLI waits for a reply of ours (an approval): its silence is then no stall. */
  awaiting?(): boolean;
  /**
   * Whether handling this line writes to the run's log by another way (a permission request, its
   * answer by policy): the events of the lines before it are handed over first, so the log keeps
   * the CLI's order.
   */
  handsOverFirst?(line: Record<string, unknown>): boolean;
  /** Once the input is written: `write` lets the protocol speak first (an interrupt). */
  started?(write: (text: string) => void): void;
  /**
   * Asks the CLI to end its turn, which it reports as its outcome line; absent when it cannot be
   * asked (it is stopped instead).
   */
  interrupt?(write: (text: string) => void): void;
}

export interface DriverConfig {
  /** Wall-clock limit of a run; 0 disables it. */
  timeoutMs: number;
  /** Longest time without any output (stdout or stderr) before the run counts as stalled; 0 disables it. */
  idleTimeoutMs: number;
  /** Longest stdout line in bytes; longer lines are dropped. */
  maxLineBytes: number;
  /** How much of stderr is kept for error messages. */
  stderrTailBytes: number;
  /**
   * Time between SIGTERM and SIGKILL, allowed for a clean exit after the outcome, and for the
   * outcome after an interrupt at a timeout or a stall.
   */
  killGraceMs: number;
  logger?: Logger;
  /** Called once the child runs, with its process group id (to clean up after a crash). */
  onSpawn?: (pgid: number) => void;
  /** The bridge's run: its id is added to the child's OTEL_RESOURCE_ATTRIBUTES. */
  runId?: string;
  /** Sees each stdout line as framed (the debug capture). */
  onRawLine?: (line: string) => void;
  /** Set: each CLI runs in a sandbox of its own (src/process/sandbox.ts). */
  sandbox?: Sandbox;
  /** Set: each CLI runs in cgroups of its own, with their memory and process limits. */
  limits?: RunLimits;
}

/** Defaults for callers building a DriverConfig. */
export const DRIVER_DEFAULTS = {
  maxLineBytes: 16 * 1024 * 1024,
  stderrTailBytes: 64 * 1024,
  killGraceMs: 5000,
} as const;

type Json = Record<string, unknown>;

type Item =
  | { kind: "line"; line: Json }
  | { kind: "exit"; code: number | null; signal: NodeJS.Signals | null }
  | { kind: "stdout_closed" }
  | { kind: "timeout" }
  | { kind: "idle" }
  | { kind: "abort" }
  | { kind: "limit"; error: RunLimitError }
  | { kind: "drain_timeout" }
  | { kind: "interrupt_timeout" };

/** An unbounded FIFO with one waiting reader. */
class Inbox<T> {
  private items: T[] = [];
  private head = 0;
  private waiter: (() => void) | undefined;

  get length(): number {
    return this.items.length - this.head;
  }

  push(item: T): void {
    this.items.push(item);
    const wake = this.waiter;
    this.waiter = undefined;
    wake?.();
  }

  /** The next item if there is one, without waiting. */
  shift(): T | undefined {
    if (this.length === 0) return undefined;
    const item = this.items[this.head] as T;
    this.head++;
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return item;
  }

  async next(): Promise<T> {
    while (this.length === 0) {
      await new Promise<void>((resolve) => {
        this.waiter = resolve;
      });
    }
    return this.shift() as T;
  }
}

/** How often the run's wall clock looks whether the CLI waits for a reply of ours. */
const WALL_CLOCK_TICK_MS = 1000;

/** Lines queued for the consumer before stdout is paused (and read again below LOW_WATER). */
const HIGH_WATER = 1024;
const LOW_WATER = 64;

/** Waits for `promise`, but at most `ms`; the timer does not outlive the wait. */
async function within(promise: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([promise, new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}

/**
 * Why the run's signal stopped it: the RunnerError it was aborted with (the bridge interrupting
 * it), else a client's cancel.
 */
function abortError(signal: AbortSignal | undefined): RunnerError {
  return signal?.reason instanceof RunnerError ? signal.reason : new RunCancelledError();
}

function toError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}

async function isDirectory(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isDirectory();
  } catch {
    return false;
  }
}

async function spawnFailure(err: NodeJS.ErrnoException, label: AgentLabel, cwd: string) {
  if (err.code === "ENOENT") {
    // spawn says ENOENT for a missing cwd too.
    return (await isDirectory(cwd)) ? new AgentNotFoundError(label) : new WorkDirNotFoundError(cwd);
  }
  return new AgentSpawnError(label, err);
}

/** The command line that starts `command`: in its sandbox, as its user, or as it is. */
async function launch(
  command: AgentCommand,
  env: Record<string, string>,
  sandbox?: Sandbox,
): Promise<Launch> {
  const { bin, args, runAs } = command;
  if (sandbox) {
    return sandbox.command({
      bin,
      args,
      cwd: command.cwd,
      env,
      ...(runAs ? { runAs } : {}),
      ...(command.reach ? { reach: command.reach } : {}),
    });
  }
  const [file, argv] = runAs ? commandAs(runAs, bin, args) : [bin, args];
  return { bin: file, args: argv, dirs: [], env: {} };
}

/**
 * The child's environment with the run's id added to the OpenTelemetry resource attributes the
 * operator set: the CLI's own telemetry (and any instrumented tool it runs) then names the run.
 */
function withRunResource(env: Record<string, string>, runId: string): Record<string, string> {
  const own = `agent_bridge.run_id=${runId}`;
  const set = env.OTEL_RESOURCE_ATTRIBUTES;
  return { ...env, OTEL_RESOURCE_ATTRIBUTES: set ? `${set},${own}` : own };
}

/**
 * The outcome the CLI reported after it was asked to end its turn, as the run's: ended by `err`
 * (a timeout, a stall), with what the CLI reported it spent.
 */
function endedBy(completion: CompletionEvent, err: RunnerError): CompletionEvent {
  return {
    ...completion,
    status: err.status,
    is_error: true,
    error: err.message,
    error_code: err.code,
  };
}

/** Runs `command` and yields its protocol's events, ending with exactly one completion. */
export async function* driveAgentProcess(
  command: AgentCommand,
  protocol: LineProtocol,
  config: DriverConfig,
  signal?: AbortSignal,
): AsyncGenerator<BridgeEvent[]> {
  const { label } = command;
  const log = config.logger ?? silentLogger;
  const startedAt = performance.now();
  const elapsed = () => performance.now() - startedAt;
  const fail = (err: RunnerError) => protocol.failure(err, elapsed());

  if (signal?.aborted) {
    yield [fail(abortError(signal))];
    return;
  }
  let child: SpawnedProcess;
  let cgroup: RunCgroup | undefined;
  try {
    const env = config.runId ? withRunResource(command.env, config.runId) : command.env;
    const started = await launch(command, env, config.sandbox);
    let [file, args] = [started.bin, started.args];
    if (config.limits) {
      cgroup = await config.limits.open(config.runId);
      [file, args] = cgroup.enter(file, args);
    }
    child = await spawnProcess(file, args, {
      cwd: command.cwd,
      env: { ...env, ...started.env },
      dirs: started.dirs,
    });
  } catch (err) {
    await cgroup?.remove();
    const failure = await spawnFailure(err as NodeJS.ErrnoException, label, command.cwd);
    // The client's completion names no server path; the operator's log does.
    log.error(`could not start the ${label.name} CLI`, {
      bin: command.bin,
      cwd: command.cwd,
      error: (err as Error).message,
    });
    yield [fail(failure)];
    return;
  }
  const pgid = child.pid;
  log.debug(`${label.name} started`, { pid: pgid, bin: command.bin, args: command.args });
  try {
    config.onSpawn?.(pgid);
  } catch (err) {
    log.warn("onSpawn callback failed", { error: toError(err).message });
  }

  const inbox = new Inbox<Item>();
  const reader = new NdjsonReader({
    maxLineBytes: config.maxLineBytes,
    ...(command.longLine ? { longLine: command.longLine } : {}),
    onOversized: (bytes) => {
      protocol.lineDropped();
      log.warn(`${label.name} stdout line over the size bound dropped`, {
        bytes,
        max_line_bytes: config.maxLineBytes,
      });
    },
    onInvalid: (preview, reason) =>
      log.warn(`${label.name} stdout line is not a JSON object; skipped`, { preview, reason }),
    ...(config.onRawLine ? { onLine: config.onRawLine } : {}),
  });
  const stderrTail = new ByteTail(config.stderrTailBytes);
  const timers: NodeJS.Timeout[] = [];
  let exited = false;
  let exitStatus: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  let paused = false;
  let lastOutputAt = performance.now();

  const exitedPromise = child.exited.then(({ code, signal }) => {
    exited = true;
    exitStatus = { code, signal };
    inbox.push({ kind: "exit", code, signal });
  });
  const stderrClosed = new Promise<void>((resolve) => child.stderr.once("close", resolve));
  child.stdout.on("data", (chunk: Buffer) => {
    lastOutputAt = performance.now();
    for (const line of reader.push(chunk)) inbox.push({ kind: "line", line });
    if (inbox.length >= HIGH_WATER && !paused) {
      paused = true;
      child.stdout.pause();
    }
  });
  child.stdout.once("close", () => {
    for (const line of reader.end()) inbox.push({ kind: "line", line });
    inbox.push({ kind: "stdout_closed" });
  });
  child.stderr.on("data", (chunk: Buffer) => {
    lastOutputAt = performance.now();
    stderrTail.push(chunk);
  });
  // The CLI may be gone before or while we write (EPIPE): the exit path reports that.
  child.stdin.on("error", (err) => log.debug(`${label.name} stdin error`, { error: err.message }));

  let wallClock: NodeJS.Timeout | undefined;
  if (config.timeoutMs > 0) {
    // The run's wall clock stops while the CLI waits for our reply to a permission request: that
    // wait has a bound of its own (the approval timeout), which must be the one to end it. Waits
    // stop it for as long again at most, so that a run holds its slot for twice the timeout at
    // most, however long its requests may wait. Looked at every second, so a wait counts to
    // within a second.
    const startedAt = performance.now();
    let spent = 0;
    let since = startedAt;
    const checkWall = () => {
      const now = performance.now();
      if (!protocol.awaiting?.()) spent += now - since;
      since = now;
      if (spent >= config.timeoutMs || now - startedAt >= 2 * config.timeoutMs) {
        inbox.push({ kind: "timeout" });
      } else
        wallClock = setTimeout(checkWall, Math.min(config.timeoutMs - spent, WALL_CLOCK_TICK_MS));
    };
    wallClock = setTimeout(checkWall, Math.min(config.timeoutMs, WALL_CLOCK_TICK_MS));
  }
  if (config.idleTimeoutMs > 0) {
    const checkIdle = () => {
      // While we hold stdout paused the silence is ours, not the CLI's.
      // So is the silence of a CLI waiting for our reply.
      if (protocol.awaiting?.()) lastOutputAt = performance.now();
      const idleFor = paused ? 0 : performance.now() - lastOutputAt;
      if (idleFor >= config.idleTimeoutMs) inbox.push({ kind: "idle" });
      else timers.push(setTimeout(checkIdle, config.idleTimeoutMs - idleFor));
    };
    timers.push(setTimeout(checkIdle, config.idleTimeoutMs));
  }
  cgroup?.watch((error) => inbox.push({ kind: "limit", error }));
  const onAbort = () => inbox.push({ kind: "abort" });
  signal?.addEventListener("abort", onAbort, { once: true });
  // Aborted while the process was being started.
  if (signal?.aborted) onAbort();

  const writeStdin = (text: string) => {
    // The CLI's silence counts from our reply (an approval may have kept it waiting long).
    lastOutputAt = performance.now();
    if (child.stdin.writable) child.stdin.write(text);
  };
  const waitForExit = (ms: number) => (exited ? Promise.resolve() : within(exitedPromise, ms));
  let groupKill: Promise<void> | undefined;
  const killGroup = () => {
    groupKill ??= terminateGroup(pgid, config.killGraceMs, log);
    return groupKill;
  };
  let stopped: Promise<void> | undefined;
  /** Ends the child and releases everything; `graceful` lets the CLI exit on its own first. */
  const stop = (graceful: boolean) => {
    stopped ??= (async () => {
      clearTimeout(wallClock);
      for (const t of timers) clearTimeout(t);
      signal?.removeEventListener("abort", onAbort);
      child.stdin.end();
      // After the result the CLI exits once stdin closes (and flushes its transcript first).
      if (graceful) await waitForExit(config.killGraceMs);
      await killGroup();
      await waitForExit(1000);
      for (const t of timers) clearTimeout(t);
      child.stdout.destroy();
      child.stderr.destroy();
      child.stdin.destroy();
    })();
    return stopped;
  };

  writeStdin(command.input);
  if (command.closeInput) child.stdin.end();
  protocol.started?.(writeStdin);

  let completion: CompletionEvent | undefined;
  let final: CompletionEvent | undefined;
  let outcomeAtMs = 0;
  let ending: RunnerError | undefined;
  let exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  let stdoutClosed = false;
  /** Events mapped since the last yield. */
  let batch: BridgeEvent[] = [];
  try {
    loop: for (;;) {
      if (paused && inbox.length <= LOW_WATER) {
        paused = false;
        lastOutputAt = performance.now();
        child.stdout.resume();
      }
      let item = inbox.shift();
      if (item === undefined) {
        // Hands over what is mapped before waiting for more: one await per batch, not per line
        // (an async generator costs about a microsecond per item, paid here once per batch).
        if (batch.length > 0) {
          yield batch;
          batch = [];
          continue;
        }
        item = await inbox.next();
      }
      switch (item.kind) {
        case "line": {
          if (batch.length > 0 && protocol.handsOverFirst?.(item.line)) {
            yield batch;
            batch = [];
          }
          for (const event of protocol.onLine(item.line, writeStdin)) {
            if (event.type === "completion") completion = event;
            else batch.push(event);
          }
          if (completion) break loop;
          continue;
        }
        case "exit":
          exit = { code: item.code, signal: item.signal };
          if (stdoutClosed) break loop;
          // Read what is still in the pipe; killing the group closes a grandchild's copy of it.
          void killGroup();
          timers.push(
            setTimeout(() => inbox.push({ kind: "drain_timeout" }), config.killGraceMs + 1000),
          );
          continue;
        case "stdout_closed":
          stdoutClosed = true;
          if (exit) break loop;
          // No result can come any more; give the process a moment to report its exit code.
          timers.push(setTimeout(() => inbox.push({ kind: "drain_timeout" }), config.killGraceMs));
          continue;
        case "drain_timeout":
        case "interrupt_timeout":
          break loop;
        case "timeout":
        case "idle": {
          // Already asked to end its turn (at the other limit): its answer is awaited.
          if (ending) continue;
          ending =
            item.kind === "timeout"
              ? new AgentTimeoutError(label, config.timeoutMs)
              : new AgentStalledError(label, config.idleTimeoutMs);
          if (!protocol.interrupt) break loop;
          protocol.interrupt(writeStdin);
          timers.push(
            setTimeout(() => inbox.push({ kind: "interrupt_timeout" }), config.killGraceMs),
          );
          continue;
        }
        case "abort":
          ending = abortError(signal);
          break loop;
        case "limit":
          ending = item.error;
          break loop;
      }
    }

    // A limit hit is the run's outcome, also when the CLI reported its own first (a fork bomb in
    // the background of a finished turn), or died of it; not when a client or the bridge stopped
    // the run.
    if (!ending || ending.status === "failed" || ending.status === "timed_out") {
      ending = (await cgroup?.limitHit()) ?? ending;
    }

    if (!completion && !ending) {
      // Its stdout closed and its exit was not reported within the grace (a loaded machine may
      // be that slow to report one): it is made to exit, so that its own code is what is told.
      if (exit === undefined && stdoutClosed) {
        await killGroup();
        await waitForExit(1000);
        exit = exitStatus;
      }
      // The process ended without a result: collect the rest of stderr for the message.
      await within(stderrClosed, 200);
      const tail = stderrTail.text();
      ending =
        exit === undefined || exit.code === 0
          ? new AgentNoResultError(label, tail)
          : new AgentExitError(label, exit.code, exit.signal, tail);
    }
    final =
      completion && ending
        ? endedBy(completion, ending)
        : (completion ?? fail(ending ?? new AgentNoResultError(label, "")));
    outcomeAtMs = elapsed();
    // Awaited (and its failure raised) when the generator returns, below.
    stop(completion !== undefined).catch(() => {});
    yield [...batch, final];
  } finally {
    // Also reached when the consumer stops early: nothing of the child may outlive the run.
    await stop(completion !== undefined);
    await cgroup?.remove();
    if (final) {
      // A failed run is something for the operator to look at; a cancel is the client's choice.
      const failed = final.status === "failed" || final.status === "timed_out";
      log[failed ? "warn" : "info"](`${label.name} run finished`, {
        status: final.status,
        ...(final.error_code ? { error_code: final.error_code } : {}),
        exit_code: exitStatus?.code ?? null,
        exit_signal: exitStatus?.signal ?? null,
        invalid_lines: reader.invalidLines,
        oversized_lines: reader.oversizedLines,
        duration_ms: Math.round(outcomeAtMs),
        stop_ms: Math.round(elapsed() - outcomeAtMs),
        ...(final.error ? { error: final.error } : {}),
      });
    }
  }
}
