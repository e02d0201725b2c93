import { finished } from "node:stream/promises";
import type { BridgeEvent, CompletionEvent } from "../../events.js";
import { silentLogger } from "../../log.js";
import {
  AgentNoResultError,
  AgentStalledError,
  AgentTimeoutError,
  type RunLimitError,
  type RunnerError,
} from "../errors.js";
import { NdjsonReader } from "../framer.js";
import { ByteTail, terminateGroup } from "../groups.js";
import type { AgentCommand, LineProtocol } from "./agent-command.js";
import { type Activity, startSilenceClock, startWallClock } from "./clocks.js";
import type { DriverConfig } from "./driver-config.js";
import { Inbox } from "./inbox.js";
import { abortError, endedBy, noOutcomeError } from "./outcome.js";
import { secretValues } from "./secret-values.js";
import { startChild } from "./start-child.js";

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

type Item =
  | { kind: "line"; line: Record<string, unknown>; raw?: string | undefined }
  | { kind: "exit"; code: number | null; signal: NodeJS.Signals | null }
  | { kind: "stdout_closed" }
  | { kind: "timeout" }
  | { kind: "idle" }
  | { kind: "abort" }
  | { kind: "limit"; error: RunLimitError }
  | { kind: "drain_timeout" }
  | { kind: "interrupt_timeout" };

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
  const started = await startChild(command, config, log);
  if ("failure" in started) {
    yield [fail(started.failure)];
    return;
  }
  const { child, cgroup } = started;
  const pgid = child.pid;
  log.debug(`${label.name} started`, { pid: pgid, bin: command.bin, args: command.args });
  try {
    config.onSpawn?.(pgid);
  } catch (err) {
    log.warn("onSpawn callback failed", { error: toError(err).message });
  }

  const { exchange } = config;
  exchange?.started(secretValues(command));
  /** With spans per event: the framed text of each line parsed from the chunk being read. */
  const raws: string[] = [];
  /** Written while a line is handled: seen after that line, whose answer they are. */
  let deferred: string[] | undefined;
  const inbox = new Inbox<Item>();
  const reader = new NdjsonReader({
    maxLineBytes: config.maxLineBytes,
    ...(command.longLine ? { longLine: command.longLine } : {}),
    ...(command.parseLine ? { parse: command.parseLine } : {}),
    onOversized: (bytes) => {
      protocol.lineDropped();
      log.warn(`${label.name} stdout line over the size bound dropped`, {
        bytes,
        max_line_bytes: config.maxLineBytes,
      });
    },
    onInvalid: (preview, reason) => {
      // Its text was kept, and it is no line.
      if (exchange) raws.pop();
      log.warn(`${label.name} stdout line is not a JSON object; skipped`, { preview, reason });
    },
    ...(exchange
      ? {
          onLine: (line: string) => {
            config.onRawLine?.(line);
            raws.push(line);
          },
        }
      : config.onRawLine
        ? { onLine: config.onRawLine }
        : {}),
  });
  /** Queues the lines of what was read: with their text, when spans per event want it. */
  const queueLines = (lines: Record<string, unknown>[]) => {
    if (!exchange) {
      for (const line of lines) inbox.push({ kind: "line", line });
      return;
    }
    const texts = raws.splice(0);
    for (const [i, line] of lines.entries()) inbox.push({ kind: "line", line, raw: texts[i] });
  };
  const stderrTail = new ByteTail(config.stderrTailBytes);
  const timers: NodeJS.Timeout[] = [];
  let exited = false;
  let exitStatus: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  const activity: Activity = { lastOutputAt: performance.now(), paused: false };

  const exitedPromise = child.exited.then(({ code, signal }) => {
    exited = true;
    exitStatus = { code, signal };
    inbox.push({ kind: "exit", code, signal });
  });
  // Either pipe may have ended before the driver got it (a CLI that exits at once with nothing on
  // it): finished() knows, where a "close" listener added now would wait for good.
  const ended = (stream: NodeJS.ReadableStream) => finished(stream).catch(() => {});
  const stderrClosed = ended(child.stderr);
  child.stdout.on("data", (chunk: Buffer) => {
    activity.lastOutputAt = performance.now();
    queueLines(reader.push(chunk));
    if (inbox.length >= HIGH_WATER && !activity.paused) {
      activity.paused = true;
      child.stdout.pause();
    }
  });
  void ended(child.stdout).then(() => {
    queueLines(reader.end());
    inbox.push({ kind: "stdout_closed" });
  });
  child.stderr.on("data", (chunk: Buffer) => {
    activity.lastOutputAt = performance.now();
    stderrTail.push(chunk);
  });
  // The CLI may be gone before or while we write (EPIPE): the exit path reports that.
  child.stdin.on("error", (err) => log.debug(`${label.name} stdin error`, { error: err.message }));

  const awaiting = () => protocol.awaiting?.() ?? false;
  const stopWallClock = startWallClock(config.timeoutMs, awaiting, () =>
    inbox.push({ kind: "timeout" }),
  );
  const stopSilenceClock = startSilenceClock(config.idleTimeoutMs, activity, awaiting, () =>
    inbox.push({ kind: "idle" }),
  );
  cgroup?.watch((error) => inbox.push({ kind: "limit", error }));
  const onAbort = () => inbox.push({ kind: "abort" });
  signal?.addEventListener("abort", onAbort, { once: true });
  // Aborted while the process was being started.
  if (signal?.aborted) onAbort();

  const writeStdin = (text: string) => {
    // The CLI's silence counts from our reply (an approval may have kept it waiting long).
    activity.lastOutputAt = performance.now();
    if (!child.stdin.writable) return;
    child.stdin.write(text);
    if (deferred) deferred.push(text);
    else exchange?.wrote(text);
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
      stopWallClock();
      stopSilenceClock();
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
      if (activity.paused && inbox.length <= LOW_WATER) {
        activity.paused = false;
        activity.lastOutputAt = performance.now();
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
          if (exchange) deferred = [];
          const events = protocol.onLine(item.line, writeStdin);
          if (exchange) {
            exchange.line(item.raw ?? "", item.line, events);
            const written = deferred ?? [];
            deferred = undefined;
            for (const text of written) exchange.wrote(text);
          }
          for (const event of events) {
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
      ending = noOutcomeError(label, exit, stderrTail.text());
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
