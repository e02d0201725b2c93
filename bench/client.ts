import { spawn } from "node:child_process";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import { userMessageLine } from "../src/agents/claude/command.js";

// The bench's side of the wire: plain node:http (one agent, no pool limit), a minimal SSE frame
// parser, the fake CLI driven directly for the floors, and the server's memory from /proc.

const agent = new http.Agent({ keepAlive: true, maxSockets: Number.POSITIVE_INFINITY });

/** Sent with every request: the server runs with keys, as in production. */
const auth: Record<string, string> = {};
export function useApiKey(key: string) {
  auth.authorization = `Bearer ${key}`;
}

export const now = () => performance.now();
/** Wall-clock milliseconds, comparable with the fake's stamps. */
export const wallNow = () => performance.timeOrigin + performance.now();

export async function requestJson<T>(
  base: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: T }> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: {
      ...auth,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
      ...headers,
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : undefined) as T };
}

export async function createSessions(base: string, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i += 20) {
    const batch = Array.from({ length: Math.min(20, count - i) }, () =>
      requestJson<{ id: string }>(base, "POST", "/v1/sessions", { title: "bench" }),
    );
    for (const res of await Promise.all(batch)) {
      if (res.status !== 201) throw new Error(`create session: ${res.status}`);
      ids.push(res.body.id);
    }
  }
  return ids;
}

export interface SseEvent {
  id: number;
  type: string;
  data: string;
}

export interface SseResult {
  status: number;
  runId: string | undefined;
  /** performance.now() of the first body byte, the first text_delta and the completion. */
  firstByteAt: number | undefined;
  firstDeltaAt: number | undefined;
  endedAt: number;
  events: number;
  firstId: number | undefined;
  lastId: number | undefined;
  /** Ids were consecutive. */
  ordered: boolean;
  completionStatus: string | undefined;
}

export interface SseOptions {
  method?: "GET" | "POST";
  body?: unknown;
  headers?: Record<string, string>;
  onEvent?: (event: SseEvent, at: number) => void;
  /** Called once the response has started (for idle subscribers). */
  onOpen?: (close: () => void) => void;
}

/** Reads an SSE response to its completion (or its end) and sums up what came. */
export function readSse(base: string, path: string, opts: SseOptions = {}): Promise<SseResult> {
  return new Promise((resolve, reject) => {
    const payload = opts.body === undefined ? undefined : JSON.stringify(opts.body);
    const req = http.request(`${base}${path}`, {
      method: opts.method ?? "GET",
      agent,
      headers: {
        accept: "text/event-stream",
        ...auth,
        ...(payload === undefined ? {} : { "content-type": "application/json" }),
        ...opts.headers,
      },
    });
    req.on("error", reject);
    req.on("response", (res) => {
      const out: SseResult = {
        status: res.statusCode ?? 0,
        runId: res.headers["x-run-id"] as string | undefined,
        firstByteAt: undefined,
        firstDeltaAt: undefined,
        endedAt: 0,
        events: 0,
        firstId: undefined,
        lastId: undefined,
        ordered: true,
        completionStatus: undefined,
      };
      let buffer = "";
      let finished = false;
      const finish = () => {
        if (finished) return;
        finished = true;
        out.endedAt = now();
        resolve(out);
      };
      opts.onOpen?.(() => {
        res.destroy();
        finish();
      });
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        const at = now();
        out.firstByteAt ??= at;
        buffer += chunk;
        let start = 0;
        for (let end = buffer.indexOf("\n\n"); end !== -1; end = buffer.indexOf("\n\n", start)) {
          const event = parseFrame(buffer, start, end);
          start = end + 2;
          if (!event) continue;
          out.events++;
          if (out.lastId !== undefined && event.id !== out.lastId + 1) out.ordered = false;
          out.firstId ??= event.id;
          out.lastId = event.id;
          if (event.type === "text_delta") out.firstDeltaAt ??= at;
          opts.onEvent?.(event, at);
          if (event.type === "completion") {
            out.completionStatus = (JSON.parse(event.data) as { status: string }).status;
            res.destroy();
            finish();
            return;
          }
        }
        buffer = buffer.slice(start);
      });
      res.on("end", finish);
      res.on("close", finish);
      res.on("error", finish);
    });
    req.end(payload);
  });
}

/** One `id:`/`event:`/`data:` frame of buffer[start, end); undefined for comments. */
function parseFrame(buffer: string, start: number, end: number): SseEvent | undefined {
  let id = Number.NaN;
  let type = "";
  let data = "";
  let pos = start;
  while (pos < end) {
    let nl = buffer.indexOf("\n", pos);
    if (nl === -1 || nl > end) nl = end;
    if (buffer.startsWith("id: ", pos)) id = Number(buffer.slice(pos + 4, nl));
    else if (buffer.startsWith("event: ", pos)) type = buffer.slice(pos + 7, nl);
    else if (buffer.startsWith("data: ", pos)) data = buffer.slice(pos + 6, nl);
    pos = nl + 1;
  }
  return type ? { id, type, data } : undefined;
}

/**
 * The floor: the same fake, with the same stdin line, piped into a bare consumer that frames
 * stdout by line and JSON.parses each. Resolves with the times of the first line and the end.
 */
export function floorRun(
  bin: string,
  prompt: string,
  opts: { firstLineOnly?: boolean } = {},
): Promise<{ firstLineMs: number; totalMs: number; lines: number }> {
  return new Promise((resolve, reject) => {
    const t0 = now();
    const child = spawn(bin, ["-p"], { stdio: ["pipe", "pipe", "inherit"] });
    child.on("error", reject);
    child.stdin.end(userMessageLine(prompt));
    let firstLineMs: number | undefined;
    let lines = 0;
    // Pieces of the unfinished line, joined once it is whole: linear however long the line.
    let parts: string[] = [];
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (chunk: string) => {
      let start = 0;
      for (let nl = chunk.indexOf("\n"); nl !== -1; nl = chunk.indexOf("\n", start)) {
        parts.push(chunk.slice(start, nl));
        JSON.parse(parts.length === 1 ? (parts[0] ?? "") : parts.join(""));
        parts = [];
        lines++;
        start = nl + 1;
        if (firstLineMs === undefined) {
          firstLineMs = now() - t0;
          if (opts.firstLineOnly) {
            child.kill("SIGKILL");
            // Nothing after the first line is read: a later chunk would start mid-line.
            child.stdout.destroy();
            resolve({ firstLineMs, totalMs: firstLineMs, lines });
            return;
          }
        }
      }
      if (start < chunk.length) parts.push(chunk.slice(start));
    });
    child.stdout.on("end", () =>
      resolve({ firstLineMs: firstLineMs ?? Number.NaN, totalMs: now() - t0, lines }),
    );
  });
}

/** VmRSS and VmHWM (peak) of a process, in bytes. */
export function memoryOf(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (name: string) => Number(new RegExp(`${name}:\\s+(\\d+)`).exec(status)?.[1] ?? 0);
  return { rss: kb("VmRSS") * 1024, peak: kb("VmHWM") * 1024 };
}

/** CPU time of a process, all its threads, user and system, in ms (Linux: 10 ms ticks). */
export function cpuMsOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // After the command's name in parentheses: state is field 3, utime 14 and stime 15.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/**
 * The server's memory after a full garbage collection (bench/gc-probe.mjs answers SIGUSR2 by
 * writing process.memoryUsage() to `file`).
 */
export async function collectedMemory(pid: number, file: string): Promise<NodeJS.MemoryUsage> {
  rmSync(file, { force: true });
  process.kill(pid, "SIGUSR2");
  for (let i = 0; i < 200 && !existsSync(file); i++) await sleep(10);
  await sleep(20);
  return JSON.parse(readFileSync(file, "utf8")) as NodeJS.MemoryUsage;
}

/** Resets the process's peak RSS (Linux `clear_refs` 5); false where that is not allowed. */
export function resetPeak(pid: number): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, "5");
    return true;
  } catch {
    return false;
  }
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
