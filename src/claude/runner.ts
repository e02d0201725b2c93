import { stat } from "node:fs/promises";
import type { BridgeEvent, CompletionEvent } from "../events.js";
import { type Logger, silentLogger } from "../log.js";
import type { AgentIdentity } from "../process/tenant-homes.js";
import { buildClaudeArgs, type CommandInput, userMessageLine } from "./command.js";
import { answerControlRequest } from "./control.js";
import {
  ClaudeCancelledError,
  ClaudeExitError,
  ClaudeNoResultError,
  ClaudeNotFoundError,
  ClaudeSpawnError,
  ClaudeStalledError,
  ClaudeTimeoutError,
  InvalidRunRequestError,
  RunnerError,
  WorkDirNotFoundError,
} from "./errors.js";
import { NdjsonReader } from "./framer.js";
import { StreamMapper } from "./mapper.js";
import { ByteTail, terminateGroup } from "./process.js";
import { withSessionFallback } from "./resume.js";
import { type SpawnedProcess, spawnProcess } from "./spawner.js";

// Runs one `claude -p` for one message and yields its BridgeEvents in batches (what the CLI wrote
// while the consumer was busy with the previous batch), ending with exactly one `completion`
// whatever happens. The child runs in its own process group; the read loop stops at the `result`
// line (not at EOF, which a grandchild holding stdout could delay forever).
//
// The completion's batch is yielded as soon as the outcome is known (a result line, a timeout, a
// stall, a cancel, the process's end), and stopping the group starts just before it: stdin closes
// (after a result the CLI exits by itself), then SIGTERM, `killGraceMs`, SIGKILL. The generator's
// return, whether the consumer asks for the next item or calls return() (also early), resolves
// only once the group is gone: a consumer that holds the run's slot until then never has two CLIs
// in one slot.

/** One message to the CLI: the command's options, plus the prompt (stdin) and where to run. */
export interface RunRequest extends CommandInput {
  prompt: string;
  cwd: string;
  /** Set: the CLI runs as the agent user, in its tenant's HOME (src/process/tenant-homes.ts). */
  identity?: AgentIdentity;
}

export interface RunnerConfig {
  /** Path (or PATH name) of the claude binary. */
  bin: string;
  /** The child's complete environment (see env.ts `childEnvironment`). */
  env: Record<string, string>;
  /** Wall-clock limit of a run; 0 disables it. */
  timeoutMs: number;
  /** Longest time without any output (stdout or stderr) before the run counts as stalled; 0 disables it. */
  idleTimeoutMs: number;
  /** Longest stdout line in bytes; longer lines are dropped. */
  maxLineBytes: number;
  /** How much of stderr is kept for error messages. */
  stderrTailBytes: number;
  /** Time between SIGTERM and SIGKILL (and allowed for a clean exit after the result). */
  killGraceMs: number;
  logger?: Logger;
  /** Called once the child runs, with its process group id (to clean up after a crash). */
  onSpawn?: (pgid: number) => void;
}

/** Defaults for callers building a RunnerConfig. */
export const RUNNER_DEFAULTS = {
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
  | { kind: "drain_timeout" };

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

/** Lines queued for the consumer before stdout is paused (and read again below LOW_WATER). */
const HIGH_WATER = 1024;
const LOW_WATER = 64;

/** Waits for `promise`, but at most `ms`; the timer does not outlive the wait. */
async function within(promise: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([promise, new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
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

async function spawnFailure(err: NodeJS.ErrnoException, bin: string, cwd: string) {
  if (err.code === "ENOENT") {
    // spawn says ENOENT for a missing cwd too.
    return (await isDirectory(cwd)) ? new ClaudeNotFoundError(bin) : new WorkDirNotFoundError(cwd);
  }
  return new ClaudeSpawnError(bin, err);
}

/** One run; started again once with the other session flag when the CLI asks for it (resume.ts). */
export function runClaude(
  req: RunRequest,
  config: RunnerConfig,
  signal?: AbortSignal,
): AsyncGenerator<BridgeEvent[]> {
  const log = config.logger ?? silentLogger;
  return withSessionFallback(req, (r) => runClaudeOnce(r, config, signal), log);
}

async function* runClaudeOnce(
  req: RunRequest,
  config: RunnerConfig,
  signal?: AbortSignal,
): AsyncGenerator<BridgeEvent[]> {
  const log = (config.logger ?? silentLogger).child({ claude_session_id: req.claudeSessionId });
  const startedAt = performance.now();
  const elapsed = () => performance.now() - startedAt;
  const mapper = new StreamMapper({ elapsedMs: elapsed });
  const fail = (err: RunnerError) => mapper.failure(err.status, err.message, err.code, elapsed());

  if (signal?.aborted) {
    yield [fail(new ClaudeCancelledError())];
    return;
  }
  let args: string[];
  try {
    args = buildClaudeArgs(req);
  } catch (err) {
    yield [
      fail(err instanceof RunnerError ? err : new InvalidRunRequestError(toError(err).message)),
    ];
    return;
  }

  let child: SpawnedProcess;
  try {
    child = await spawnProcess(config.bin, args, {
      cwd: req.cwd,
      env: req.identity ? { ...config.env, ...req.identity.env } : config.env,
      ...(req.identity ? { runAs: req.identity.runAs } : {}),
    });
  } catch (err) {
    const failure = await spawnFailure(err as NodeJS.ErrnoException, config.bin, req.cwd);
    // The client's completion names no server path; the operator's log does.
    log.error("could not start the claude CLI", {
      bin: config.bin,
      cwd: req.cwd,
      error: (err as Error).message,
    });
    yield [fail(failure)];
    return;
  }
  const pgid = child.pid;
  log.debug("claude started", { pid: pgid, bin: config.bin, args });
  try {
    config.onSpawn?.(pgid);
  } catch (err) {
    log.warn("onSpawn callback failed", { error: toError(err).message });
  }

  const inbox = new Inbox<Item>();
  const reader = new NdjsonReader({
    maxLineBytes: config.maxLineBytes,
    onOversized: (bytes) => {
      mapper.lineDropped();
      log.warn("claude stdout line over the size bound dropped", {
        bytes,
        max_line_bytes: config.maxLineBytes,
      });
    },
    onInvalid: (preview, reason) =>
      log.warn("claude stdout line is not a JSON object; skipped", { preview, reason }),
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
  child.stdin.on("error", (err) => log.debug("claude stdin error", { error: err.message }));

  if (config.timeoutMs > 0) {
    timers.push(setTimeout(() => inbox.push({ kind: "timeout" }), config.timeoutMs));
  }
  if (config.idleTimeoutMs > 0) {
    const checkIdle = () => {
      // While we hold stdout paused the silence is ours, not the CLI's.
      const idleFor = paused ? 0 : performance.now() - lastOutputAt;
      if (idleFor >= config.idleTimeoutMs) inbox.push({ kind: "idle" });
      else timers.push(setTimeout(checkIdle, config.idleTimeoutMs - idleFor));
    };
    timers.push(setTimeout(checkIdle, config.idleTimeoutMs));
  }
  const onAbort = () => inbox.push({ kind: "abort" });
  signal?.addEventListener("abort", onAbort, { once: true });
  // Aborted while the process was being started.
  if (signal?.aborted) onAbort();

  const writeStdin = (text: string) => {
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

  writeStdin(userMessageLine(req.prompt));

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
          const line = item.line;
          if (line.type === "control_request") {
            const answer = answerControlRequest(line);
            if (!answer) continue;
            writeStdin(answer.line);
            const q = answer.question;
            const event = q ? mapper.questionFromControl(q.toolUseId, q.input) : undefined;
            if (event) batch.push(event);
            continue;
          }
          if (line.type === "control_cancel_request") continue;
          for (const event of mapper.push(line)) {
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
          break loop;
        case "timeout":
          ending = new ClaudeTimeoutError(config.timeoutMs);
          break loop;
        case "idle":
          ending = new ClaudeStalledError(config.idleTimeoutMs);
          break loop;
        case "abort":
          ending = new ClaudeCancelledError();
          break loop;
      }
    }

    if (!completion && !ending) {
      // The process ended without a result: collect the rest of stderr for the message.
      await within(stderrClosed, 200);
      const tail = stderrTail.text();
      ending =
        exit === undefined || exit.code === 0
          ? new ClaudeNoResultError(tail)
          : new ClaudeExitError(exit.code, exit.signal, tail);
    }
    final = completion ?? fail(ending ?? new ClaudeNoResultError(""));
    outcomeAtMs = elapsed();
    // Awaited (and its failure raised) when the generator returns, below.
    stop(completion !== undefined).catch(() => {});
    yield [...batch, final];
  } finally {
    // Also reached when the consumer stops early: nothing of the child may outlive the run.
    await stop(completion !== undefined);
    if (final) {
      // A failed run is something for the operator to look at; a cancel is the client's choice.
      const failed = final.status === "failed" || final.status === "timed_out";
      log[failed ? "warn" : "info"]("claude run finished", {
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
