import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { assistant, result, systemInit } from "../test/support/stream-json-lines.js";
import {
  collectedMemory,
  cpuMsOf,
  createSessions,
  floorRun,
  memoryOf,
  now,
  readSse,
  requestJson,
  resetPeak,
  type SseResult,
  sleep,
} from "./client.js";
import type { SdkBatch, SdkPeer } from "./server.js";
import { DELTAS_PER_MESSAGE, type Transcripts } from "./transcripts.js";

// One function per measurement of issue 9. Each returns the samples of every repetition; the
// caller takes medians. A check that fails (an event lost, out of order, a run that did not
// succeed) throws: a fast wrong answer is not a result.

export interface Server {
  url: string;
  pid: number;
  /** The fake CLI the server runs, spawned directly for the floors. */
  bin: string;
  transcripts: Transcripts;
  /** Where the server writes its memory use when asked (see gc-probe.mjs). */
  memoryFile: string;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? (s[mid] ?? Number.NaN) : ((s[mid - 1] ?? 0) + (s[mid] ?? 0)) / 2;
};

export { median };

function post(
  server: Server,
  sessionId: string,
  prompt: string,
  opts: Parameters<typeof readSse>[2] = {},
) {
  return readSse(server.url, `/v1/sessions/${sessionId}/messages`, {
    method: "POST",
    body: { text: prompt },
    ...opts,
  });
}

function expect(condition: boolean, what: string, res?: SseResult): asserts condition {
  if (!condition)
    throw new Error(`bench check failed: ${what}${res ? ` ${JSON.stringify(res)}` : ""}`);
}

function expectComplete(res: SseResult, events: number, what: string) {
  expect(res.status === 200, `${what}: HTTP ${res.status}`, res);
  expect(res.completionStatus === "succeeded", `${what}: completion ${res.completionStatus}`, res);
  expect(res.events === events, `${what}: ${res.events} events, expected ${events}`, res);
  expect(res.ordered && res.firstId === 1, `${what}: ids not 1..n in order`, res);
}

/** Runs of each relay transcript in a warm-up, after ten short runs: as memory at rest counts it. */
const REST_WARM_UP: [deltas: number, runs: number][] = [[10_000, 1]];

/**
 * The same before the timed rounds: a fresh server takes about ten runs of 10 000 deltas to reach
 * the pace it keeps (docs/performance.md), which three runs of a round measured instead.
 */
export const TIMED_WARM_UP: [deltas: number, runs: number][] = [
  [10_000, 10],
  [100_000, 2],
];

/**
 * Runs so that the JIT and the database caches are warm before anything is measured; the SDK
 * peer's too, the same runs, when there is one.
 */
export async function warmUp(server: Server, peer?: SdkPeer, relayRuns = REST_WARM_UP) {
  const [session = ""] = await createSessions(server.url, 1);
  const both = async (path: string) => {
    await post(server, session, `@${path}`);
    await peer?.run(`@${path}`);
  };
  for (let i = 0; i < 10; i++) await both(server.transcripts.small);
  for (const [deltas, runs] of relayRuns) {
    const path = server.transcripts.relay[deltas];
    for (let i = 0; path && i < runs; i++) await both(path);
  }
}

/** A transcript, and what the bridge and the SDK make of it. */
export interface Workload {
  path: string;
  /** SSE events of the bridge's run, run_started and completion included. */
  events: number;
  /** Text deltas (`stream_event`) and `assistant` messages the SDK's `query()` yields. */
  sdkDeltas: number;
  sdkAssistants: number;
}

/** The relay transcript of `deltas` deltas, in messages of DELTAS_PER_MESSAGE. */
export function relayWorkload(server: Server, deltas: number): Workload {
  const path = server.transcripts.relay[deltas];
  if (!path) throw new Error(`no transcript of ${deltas} deltas`);
  return {
    path,
    events: deltas + 2,
    sdkDeltas: deltas,
    sdkAssistants: Math.ceil(deltas / DELTAS_PER_MESSAGE),
  };
}

/** `count` whole assistant messages, no deltas: one text_delta each on the bridge. */
export function wholeWorkload(server: Server, count: number): Workload {
  const path = server.transcripts.whole[count];
  if (!path) throw new Error(`no transcript of ${count} whole messages`);
  return { path, events: count + 2, sdkDeltas: 0, sdkAssistants: count };
}

/** Each side's CPU is counted over its run and this long after it (work left after the end). */
const CPU_SETTLE_MS = 100;

/** This process's CPU, user and system, in ms. */
function ownCpuMs(): number {
  const cpu = process.cpuUsage();
  return (cpu.user + cpu.system) / 1000;
}

/** `fn`'s result, and the CPU `cpuMs` counts over it and CPU_SETTLE_MS after. */
async function counted<T>(cpuMs: () => number, fn: () => Promise<T>): Promise<[T, number]> {
  const before = cpuMs();
  const out = await fn();
  await sleep(CPU_SETTLE_MS);
  return [out, cpuMs() - before];
}

function expectSdk(batch: SdkBatch, workload: Workload, what: string) {
  for (const run of batch.runs) {
    expect(
      run.result === "success" &&
        run.deltas === workload.sdkDeltas &&
        run.assistants === workload.sdkAssistants,
      `${what}: the SDK's query() gave ${JSON.stringify(run)}`,
    );
  }
}

export interface RelaySample {
  bridgeMs: number;
  /** The SDK peer: its query() call to its `result` message. */
  sdkMs: number;
  floorMs: number;
  events: number;
  eventsPerSec: number;
  /** Messages the SDK's query() yielded, per second. */
  sdkMessagesPerSec: number;
  floorLinesPerSec: number;
  /** The server's CPU (/proc/<pid>/stat), the SDK peer's and the floor's (each its process's). */
  bridgeCpuMs: number;
  sdkCpuMs: number;
  floorCpuMs: number;
  runId: string;
}

/**
 * POST to the client's completion, against the Agent SDK's `query()` to its `result` (its own
 * process) and the fake piped into a bare JSON.parse consumer (the floor, in this process): one
 * of each in turn.
 */
export async function relay(
  server: Server,
  peer: SdkPeer,
  workload: Workload,
  reps: number,
): Promise<RelaySample[]> {
  const prompt = `@${workload.path}`;
  const sessions = await createSessions(server.url, reps);
  const samples: RelaySample[] = [];
  for (const session of sessions) {
    const [floor, floorCpuMs] = await counted(ownCpuMs, () => floorRun(server.bin, prompt));
    const sdk = await peer.run(prompt, 1, CPU_SETTLE_MS);
    expectSdk(sdk, workload, "relay");
    const t0 = now();
    const [res, bridgeCpuMs] = await counted(
      () => cpuMsOf(server.pid),
      () => post(server, session, prompt),
    );
    const bridgeMs = res.endedAt - t0;
    expectComplete(res, workload.events, `relay ${workload.path}`);
    const sdkRun = sdk.runs[0];
    const sdkMs = sdkRun?.resultMs ?? Number.NaN;
    samples.push({
      bridgeMs,
      sdkMs,
      floorMs: floor.totalMs,
      events: res.events,
      eventsPerSec: (res.events / bridgeMs) * 1000,
      sdkMessagesPerSec: ((sdkRun?.messages ?? 0) / sdkMs) * 1000,
      floorLinesPerSec: (floor.lines / floor.totalMs) * 1000,
      bridgeCpuMs,
      sdkCpuMs: sdk.cpuMs,
      floorCpuMs,
      runId: res.runId ?? "",
    });
  }
  return samples;
}

export interface TogetherSample {
  /** From the start to the last completion (bridge), `result` (SDK) or end of output (floor). */
  bridgeMs: number;
  sdkMs: number;
  floorMs: number;
  runs: number;
}

/**
 * `runs` runs of the same transcript at once, wall time: as many POSTs each read to its
 * completion, as many `query()` in the one SDK peer, as many bare consumers; one of each in turn.
 */
export async function together(
  server: Server,
  peer: SdkPeer,
  workload: Workload,
  runs: number,
  reps: number,
): Promise<TogetherSample[]> {
  const prompt = `@${workload.path}`;
  const samples: TogetherSample[] = [];
  for (let r = 0; r < reps; r++) {
    const sessions = await createSessions(server.url, runs);
    const f0 = now();
    const floors = await Promise.all(
      Array.from({ length: runs }, () => floorRun(server.bin, prompt)),
    );
    const floorMs = now() - f0;
    expect(new Set(floors.map((f) => f.lines)).size === 1, "together: floors read unlike lines");
    const sdk = await peer.run(prompt, runs);
    expectSdk(sdk, workload, "together");
    const t0 = now();
    const results = await Promise.all(sessions.map((session) => post(server, session, prompt)));
    for (const res of results) expectComplete(res, workload.events, "together");
    const bridgeMs = Math.max(...results.map((res) => res.endedAt)) - t0;
    samples.push({ bridgeMs, sdkMs: sdk.wallMs, floorMs, runs });
  }
  return samples;
}

export interface FirstEventSample {
  firstByteMs: number;
  firstDeltaMs: number;
  /** The SDK peer: its query() call to its first text delta. */
  sdkFirstDeltaMs: number;
  floorMs: number;
}

/**
 * POST to the first SSE byte and to the first text_delta, against the SDK's query() to its first
 * text delta and spawn-and-read-a-line (the floor).
 */
export async function firstEvent(
  server: Server,
  peer: SdkPeer,
  reps: number,
): Promise<FirstEventSample[]> {
  // bench/transcripts.ts: 5 deltas in one message.
  const small: Workload = {
    path: server.transcripts.small,
    events: 7,
    sdkDeltas: 5,
    sdkAssistants: 1,
  };
  const prompt = `@${small.path}`;
  const sessions = await createSessions(server.url, reps);
  const samples: FirstEventSample[] = [];
  for (const session of sessions) {
    const floor = await floorRun(server.bin, prompt, { firstLineOnly: true });
    const sdk = await peer.run(prompt);
    expectSdk(sdk, small, "first event");
    const t0 = now();
    const res = await post(server, session, prompt);
    expectComplete(res, small.events, "first event");
    samples.push({
      firstByteMs: (res.firstByteAt ?? Number.NaN) - t0,
      firstDeltaMs: (res.firstDeltaAt ?? Number.NaN) - t0,
      sdkFirstDeltaMs: sdk.runs[0]?.firstDeltaMs ?? Number.NaN,
      floorMs: floor.firstLineMs,
    });
  }
  return samples;
}

export interface SandboxSample {
  /** From the run's `run_started` to its first `text_delta`, on a server without the sandbox. */
  plainMs: number;
  /** The same on a server whose runs each get a sandbox of their own. */
  sandboxedMs: number;
}

/**
 * What the run's sandbox adds to its start: run_started to the first text_delta, on a server
 * without the sandbox and one with it, one run on each in turn (so both see the same load).
 */
export async function sandboxCost(
  plain: Server,
  sandboxed: Server,
  reps: number,
): Promise<SandboxSample[]> {
  const startToDelta = async (server: Server, session: string) => {
    let startedAt = Number.NaN;
    const res = await post(server, session, `@${server.transcripts.small}`, {
      onEvent: (event, at) => {
        if (event.type === "run_started") startedAt = at;
      },
    });
    expectComplete(res, 7, "sandbox cost");
    return (res.firstDeltaAt ?? Number.NaN) - startedAt;
  };
  const [plainSessions, sandboxedSessions] = await Promise.all([
    createSessions(plain.url, reps),
    createSessions(sandboxed.url, reps),
  ]);
  const samples: SandboxSample[] = [];
  for (let i = 0; i < reps; i++) {
    samples.push({
      plainMs: await startToDelta(plain, plainSessions[i] ?? ""),
      sandboxedMs: await startToDelta(sandboxed, sandboxedSessions[i] ?? ""),
    });
  }
  return samples;
}

export interface GatewayCallSample {
  /** From the message's POST to its first text_delta. */
  firstDeltaMs: number;
  /** From the message's POST to its completion. */
  totalMs: number;
  /** At the stand-in CLI: from its API request leaving to the answer's first byte. */
  firstByteMs: number;
}

export interface GatewayRound {
  deltas: number;
  /** One run on each server in turn. */
  pairs: { direct: GatewayCallSample; gateway: GatewayCallSample }[];
  /** Each server's CPU over the round, divided by its runs. */
  cpuMsPerCall: { direct: number; gateway: number };
}

/** Where the API was reached from the stand-in CLI (bench/fake-cli.mjs `api`), and when. */
interface ApiCallStats {
  baseUrl: string;
  sentAt: number;
  firstByteAt: number;
}

/**
 * What the model gateway adds to a call: runs whose stand-in CLI makes one streamed Messages API
 * call of `deltas` deltas, on a server whose CLI calls the upstream itself (`direct`: no
 * credential in its environment) and one whose CLI calls through its gateway (`gateway`), one run
 * on each in turn, which goes first alternating. Checks that each call took the way it should:
 * the direct CLI called the upstream without a credential, the other called elsewhere (the
 * gateway), and the upstream got the operator's credential once for each of those calls.
 */
export async function gatewayCost(
  direct: Server,
  gateway: Server,
  upstream: { url: string; credentials(): Promise<Record<string, number>> },
  operatorKey: string,
  statsDir: string,
  deltas: number,
  reps: number,
): Promise<GatewayRound> {
  const call = async (server: Server, session: string, name: string) => {
    const statsFile = `${statsDir}/${name}.json`;
    // Not an earlier round's.
    rmSync(statsFile, { force: true });
    const t0 = now();
    const res = await post(server, session, `!api ${deltas} ${statsFile}`);
    expectComplete(res, deltas + 2, `gateway round (${name})`);
    const stats = JSON.parse(readFileSync(statsFile, "utf8")) as ApiCallStats;
    const sample = {
      firstDeltaMs: (res.firstDeltaAt ?? Number.NaN) - t0,
      totalMs: res.endedAt - t0,
      firstByteMs: stats.firstByteAt - stats.sentAt,
    };
    return { sample, baseUrl: stats.baseUrl };
  };
  const [directSessions, gatewaySessions] = await Promise.all([
    createSessions(direct.url, reps),
    createSessions(gateway.url, reps),
  ]);
  const before = await upstream.credentials();
  // Over the whole round, so that what a run leaves to do after its completion counts too.
  const cpu0 = { direct: cpuMsOf(direct.pid), gateway: cpuMsOf(gateway.pid) };
  const timed = async (side: "direct" | "gateway", i: number) => {
    const server = side === "direct" ? direct : gateway;
    const session = (side === "direct" ? directSessions : gatewaySessions)[i] ?? "";
    const out = await call(server, session, `${side}-${deltas}-${i}`);
    const viaUpstream = out.baseUrl.replace(/\/+$/, "") === upstream.url;
    expect(
      viaUpstream === (side === "direct"),
      `gateway round: the ${side} CLI called ${out.baseUrl}`,
    );
    return out.sample;
  };
  const pairs: GatewayRound["pairs"] = [];
  for (let i = 0; i < reps; i++) {
    if (i % 2 === 0) {
      const d = await timed("direct", i);
      pairs.push({ direct: d, gateway: await timed("gateway", i) });
    } else {
      const g = await timed("gateway", i);
      pairs.push({ direct: await timed("direct", i), gateway: g });
    }
  }
  await sleep(300);
  const cpuMsPerCall = {
    direct: (cpuMsOf(direct.pid) - cpu0.direct) / reps,
    gateway: (cpuMsOf(gateway.pid) - cpu0.gateway) / reps,
  };
  const after = await upstream.credentials();
  const added = (credential: string) => (after[credential] ?? 0) - (before[credential] ?? 0);
  expect(
    added("none") === reps && added(operatorKey) === reps,
    `gateway round: the upstream's calls by credential went ${JSON.stringify(before)} → ${JSON.stringify(after)}`,
  );
  return { deltas, pairs, cpuMsPerCall };
}

export interface SandboxMemorySample {
  /** RSS of a run's bubblewrap processes (the one started, and its namespace's init). */
  perRunRss: number;
  /** Their proportional share (PSS): what they add, their shared pages divided among them. */
  perRunPss: number;
  runs: number;
}

/** The parent of a process; undefined once it is gone. */
function parentOf(pid: number): number | undefined {
  try {
    // After the command's name in parentheses (which may hold spaces): state, then the ppid.
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
  } catch {
    return undefined;
  }
}

/** Whether `pid` descends from `ancestor`. */
function descendsFrom(pid: number, ancestor: number): boolean {
  for (let p = parentOf(pid); p !== undefined && p > 1; p = parentOf(p)) {
    if (p === ancestor) return true;
  }
  return false;
}

/** Sums the RSS and PSS of the bwrap processes the server `serverPid` started. */
function bwrapMemory(serverPid: number): { rss: number; pss: number; processes: number } {
  const total = { rss: 0, pss: 0, processes: 0 };
  for (const pid of readdirSync("/proc").filter((e) => /^\d+$/.test(e))) {
    try {
      if (readFileSync(`/proc/${pid}/comm`, "utf8").trim() !== "bwrap") continue;
      if (!descendsFrom(Number(pid), serverPid)) continue;
      const rollup = readFileSync(`/proc/${pid}/smaps_rollup`, "utf8");
      const kb = (field: string) =>
        Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(rollup)?.[1] ?? 0);
      total.rss += kb("Rss") * 1024;
      total.pss += kb("Pss") * 1024;
      total.processes++;
    } catch {
      // Gone meanwhile.
    }
  }
  return total;
}

/** The memory of the sandboxes of `count` runs held open at once. */
export async function sandboxMemory(
  server: Server,
  count: number,
  reps: number,
): Promise<SandboxMemorySample[]> {
  const samples: SandboxMemorySample[] = [];
  for (let r = 0; r < reps; r++) {
    const ids: string[] = [];
    const streams = await holdRuns(server, count, ids);
    const held = bwrapMemory(server.pid);
    await Promise.all(ids.map((id) => requestJson(server.url, "POST", `/v1/runs/${id}/cancel`)));
    for (const res of await Promise.all(streams)) {
      expect(res.completionStatus === "cancelled", "held run not cancelled", res);
    }
    expect(held.processes === 2 * count, `${held.processes} bwrap processes for ${count} runs`);
    samples.push({ perRunRss: held.rss / count, perRunPss: held.pss / count, runs: count });
  }
  return samples;
}

export interface ConcurrencySample {
  eventsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  events: number;
  wallMs: number;
}

/**
 * `runs` runs at once, `deltas` stamped deltas each (`rate` lines/s per run, 0 = as fast as the
 * pipe takes them). Latency of an event: its arrival at the client minus the fake's write stamp.
 */
export async function concurrency(
  server: Server,
  runs: number,
  deltas: number,
  rate: number,
  reps: number,
): Promise<ConcurrencySample[]> {
  const samples: ConcurrencySample[] = [];
  for (let r = 0; r < reps; r++) {
    const sessions = await createSessions(server.url, runs);
    const latencies = new Float64Array(runs * deltas);
    let n = 0;
    const t0 = now();
    const results = await Promise.all(
      sessions.map((session) => {
        let expected = 0;
        let inOrder = true;
        return post(server, session, `!stamped ${deltas} ${rate}`, {
          onEvent: (event, at) => {
            if (event.type !== "text_delta") return;
            const text = (JSON.parse(event.data) as { text: string }).text;
            const sep = text.indexOf("@");
            if (Number(text.slice(0, sep)) !== expected++) inOrder = false;
            latencies[n++] = performance.timeOrigin + at - Number(text.slice(sep + 1, -1));
          },
        }).then((res) => ({ res, inOrder, deltas: expected }));
      }),
    );
    for (const { res, inOrder, deltas: got } of results) {
      expectComplete(res, deltas + 2, "concurrency");
      expect(inOrder && got === deltas, `concurrency: deltas out of order or lost (${got})`, res);
    }
    const wallMs = Math.max(...results.map((r) => r.res.endedAt)) - t0;
    const sorted = latencies.subarray(0, n).sort();
    const events = results.reduce((sum, r) => sum + r.res.events, 0);
    samples.push({
      eventsPerSec: (events / wallMs) * 1000,
      p50Ms: sorted[Math.floor(n * 0.5)] ?? Number.NaN,
      p99Ms: sorted[Math.floor(n * 0.99)] ?? Number.NaN,
      maxMs: sorted[n - 1] ?? Number.NaN,
      events,
      wallMs,
    });
  }
  return samples;
}

export interface ReplaySample {
  ms: number;
  events: number;
}

/** Reconnects to a finished run with `Last-Event-ID`, timing the request to the last event. */
export async function replay(
  server: Server,
  runId: string,
  lastEventId: number,
  total: number,
  reps: number,
): Promise<ReplaySample[]> {
  const samples: ReplaySample[] = [];
  for (let r = 0; r < reps; r++) {
    const t0 = now();
    const res = await readSse(server.url, `/v1/runs/${runId}/events`, {
      headers: { "last-event-id": String(lastEventId) },
    });
    expect(res.completionStatus === "succeeded", "replay: no completion", res);
    expect(res.firstId === lastEventId + 1 && res.ordered, "replay: wrong ids", res);
    expect(res.events === total - lastEventId, `replay: ${res.events} events`, res);
    samples.push({ ms: res.endedAt - t0, events: res.events });
  }
  return samples;
}

export interface BigLineSample {
  bridgeMs: number;
  parseMs: number;
  floorMs: number;
  lineBytes: number;
  peakRss: number;
  restRss: number;
  peakFromProc: boolean;
}

/** A transcript holding one huge tool_result line: the bridge against JSON.parse of that line. */
export async function bigLine(server: Server, reps: number): Promise<BigLineSample[]> {
  const path = server.transcripts.bigLine;
  const lines = readFileSync(path, "utf8").split("\n");
  const line = lines.reduce((a, b) => (b.length > a.length ? b : a), "");
  const lineBytes = Buffer.byteLength(line);
  const sessions = await createSessions(server.url, reps);
  const samples: BigLineSample[] = [];
  for (const session of sessions) {
    const p0 = now();
    JSON.parse(line);
    const parseMs = now() - p0;
    const floor = await floorRun(server.bin, `@${path}`);
    await sleep(200);
    const restRss = memoryOf(server.pid).rss;
    const peakFromProc = resetPeak(server.pid);
    // Where the peak cannot be reset, sample RSS instead (may miss a short spike).
    let polled = restRss;
    const poll = setInterval(() => {
      polled = Math.max(polled, memoryOf(server.pid).rss);
    }, 5);
    const t0 = now();
    const res = await post(server, session, `@${path}`);
    clearInterval(poll);
    // run_started, the Read status, 10 deltas, completion
    expectComplete(res, 13, "64 MB line");
    samples.push({
      bridgeMs: res.endedAt - t0,
      parseMs,
      floorMs: floor.totalMs,
      lineBytes,
      peakRss: peakFromProc ? memoryOf(server.pid).peak : polled,
      restRss,
      peakFromProc,
    });
  }
  return samples;
}

/**
 * Memory after the server has been idle a moment and has collected its garbage: RSS, and the
 * JavaScript heap plus buffers, which (unlike RSS) the allocator's caching does not blur.
 */
async function settled(server: Server): Promise<{ rss: number; heap: number }> {
  await sleep(300);
  const m = await collectedMemory(server.pid, server.memoryFile);
  return { rss: m.rss, heap: m.heapUsed + m.external };
}

export async function restRss(server: Server): Promise<number> {
  return (await settled(server)).rss;
}

export interface ActiveRunSample {
  perRunBytes: number;
  perRunHeapBytes: number;
  runs: number;
}

/** Server RSS per active run (its CLI process excluded): runs held open, then cancelled. */
export async function activeRuns(
  server: Server,
  count: number,
  reps: number,
): Promise<ActiveRunSample[]> {
  const samples: ActiveRunSample[] = [];
  for (let r = 0; r < reps; r++) {
    const before = await settled(server);
    const ids: string[] = [];
    const streams = await holdRuns(server, count, ids);
    const after = await settled(server);
    await Promise.all(ids.map((id) => requestJson(server.url, "POST", `/v1/runs/${id}/cancel`)));
    for (const res of await Promise.all(streams)) {
      expect(res.completionStatus === "cancelled", "held run not cancelled", res);
    }
    samples.push({
      perRunBytes: (after.rss - before.rss) / count,
      perRunHeapBytes: (after.heap - before.heap) / count,
      runs: count,
    });
  }
  return samples;
}

/** Starts runs whose CLI holds (one delta, then silence); resolves once each client has it. */
async function holdRuns(server: Server, count: number, ids: string[]) {
  const sessions = await createSessions(server.url, count);
  const started: Promise<void>[] = [];
  const streams: Promise<SseResult>[] = [];
  for (const session of sessions) {
    let seen = () => {};
    started.push(new Promise<void>((resolve) => (seen = resolve)));
    streams.push(
      post(server, session, "!hold", {
        onEvent: (e) => {
          if (e.type === "run_started") ids.push((JSON.parse(e.data) as { run_id: string }).run_id);
          if (e.type === "text_delta") seen();
        },
      }),
    );
  }
  await Promise.all(started);
  return streams;
}

export interface SubscriberSample {
  perSubscriberBytes: number;
  perSubscriberHeapBytes: number;
  subscribers: number;
}

/** Server RSS per idle SSE subscriber: many followers of one run whose CLI is silent. */
export async function idleSubscribers(
  server: Server,
  count: number,
  reps: number,
): Promise<SubscriberSample[]> {
  const samples: SubscriberSample[] = [];
  for (let r = 0; r < reps; r++) {
    const ids: string[] = [];
    const [owner] = await holdRuns(server, 1, ids);
    const runId = ids[0] ?? "";
    const before = await settled(server);
    const opened: Promise<void>[] = [];
    const followers: Promise<SseResult>[] = [];
    for (let i = 0; i < count; i++) {
      let seen = () => {};
      opened.push(new Promise<void>((resolve) => (seen = resolve)));
      followers.push(
        readSse(server.url, `/v1/runs/${runId}/events`, {
          onEvent: (e) => {
            if (e.type === "text_delta") seen();
          },
        }),
      );
      // Opened in small groups, as clients arrive, not as one burst of connects.
      if (i % 100 === 99) await Promise.all(opened.slice(i - 99));
    }
    await Promise.all(opened);
    const after = await settled(server);
    await requestJson(server.url, "POST", `/v1/runs/${runId}/cancel`);
    for (const res of await Promise.all([...followers, owner as Promise<SseResult>])) {
      expect(res.completionStatus === "cancelled", "follower did not see the cancel", res);
    }
    samples.push({
      perSubscriberBytes: (after.rss - before.rss) / count,
      perSubscriberHeapBytes: (after.heap - before.heap) / count,
      subscribers: count,
    });
  }
  return samples;
}

export interface LeakSample {
  runs: number;
  rss: number;
  heap: number;
}

/** RSS along `total` sequential runs of one session (after a warm-up of its own). */
export async function sequentialRuns(server: Server, total: number): Promise<LeakSample[]> {
  const [session = ""] = await createSessions(server.url, 1);
  const prompt = `@${server.transcripts.small}`;
  for (let i = 0; i < 50; i++) await post(server, session, prompt);
  const samples: LeakSample[] = [{ runs: 0, ...(await settled(server)) }];
  for (let i = 1; i <= total; i++) {
    const res = await post(server, session, prompt);
    expectComplete(res, 7, "sequential run");
    if (i % (total / 4) === 0) samples.push({ runs: i, ...(await settled(server)) });
  }
  return samples;
}

export interface FollowerSample {
  p50Ms: number;
  p99Ms: number;
  /** Events over the time from the message's post to this follower's completion. */
  eventsPerSec: number;
}

export interface FollowSample {
  /** Following on the instance that runs the run. */
  local: FollowerSample;
  /** Following on another instance on the same database. */
  remote: FollowerSample;
}

/**
 * A run on `owner`, followed from the start on `owner` and on `other` (another instance on the
 * same database): each delta's latency from its write stamp to its arrival, and each follower's
 * events per second. `rate` 0: as fast as the pipe takes the lines.
 */
export async function follow(
  owner: Server,
  other: Server,
  deltas: number,
  rate: number,
  reps: number,
): Promise<FollowSample[]> {
  const samples: FollowSample[] = [];
  for (let r = 0; r < reps; r++) {
    const [session] = await createSessions(owner.url, 1);
    const t0 = now();
    const { status, body: run } = await requestJson<{ id: string }>(
      owner.url,
      "POST",
      `/v1/sessions/${session}/messages`,
      { text: `!stamped ${deltas} ${rate}` },
      { Prefer: "respond-async" },
    );
    expect(status === 202, `follow: HTTP ${status}`);
    const followOn = async (server: Server): Promise<FollowerSample> => {
      const latencies = new Float64Array(deltas);
      let n = 0;
      const res = await readSse(server.url, `/v1/runs/${run.id}/events`, {
        onEvent: (event, at) => {
          if (event.type !== "text_delta") return;
          const text = (JSON.parse(event.data) as { text: string }).text;
          latencies[n++] =
            performance.timeOrigin + at - Number(text.slice(text.indexOf("@") + 1, -1));
        },
      });
      expectComplete(res, deltas + 2, `follow on ${server.url}`);
      const sorted = latencies.subarray(0, n).sort();
      return {
        p50Ms: sorted[Math.floor(n * 0.5)] ?? Number.NaN,
        p99Ms: sorted[Math.floor(n * 0.99)] ?? Number.NaN,
        eventsPerSec: (res.events / (res.endedAt - t0)) * 1000,
      };
    };
    const [local, remote] = await Promise.all([followOn(owner), followOn(other)]);
    samples.push({ local, remote });
  }
  return samples;
}

export interface CliSample {
  commandMs: number;
  floorMs: number;
}

/** Runs `command` to its exit; its wall time in ms. Throws unless it exits 0. */
function timedRun(command: string, args: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const start = now();
  return new Promise((resolve, reject) => {
    execFile(command, args, { env }, (err) => (err ? reject(err) : resolve(now() - start)));
  });
}

/**
 * `agent-bridge sessions ls` as a user runs it (the bin, which runs the build) against the server, from
 * start to exit; floor: starting Node with nothing to run.
 */
export async function cliCommand(
  server: Server,
  apiKey: string,
  reps: number,
): Promise<CliSample[]> {
  const bin = fileURLToPath(new URL("../src/cli/bin.mjs", import.meta.url));
  const env = { ...process.env, AGENT_BRIDGE_URL: server.url, AGENT_BRIDGE_KEY: apiKey };
  const samples: CliSample[] = [];
  for (let i = 0; i < reps; i++) {
    samples.push({
      commandMs: await timedRun(process.execPath, [bin, "sessions", "ls"], env),
      floorMs: await timedRun(process.execPath, ["-e", "0"], env),
    });
  }
  return samples;
}

export interface TranscriptGrowthWindow {
  /** The runs of the window, counted from 1. */
  from: number;
  to: number;
  /** POST to completion, median over the window's runs. */
  medianMs: number;
  /**
   * The CPU over the window, per run, of the server and its children (the file processes that
   * read and write the transcript, and the stand-in CLIs, the same each run).
   */
  cpuMsPerRun: number;
  /** The session's transcript at the window's end. */
  transcriptBytes: number;
}

/**
 * A long session's per-run cost: `runs` runs of one session on a server whose stand-in CLI
 * (fake-appending-cli.sh) appends `appendBytes` of transcript lines to the session's transcript
 * each run, as the CLI does, so the bridge restores and stores a transcript that grows by that
 * much a run. The first and last `window` runs are reported, after as many on another session
 * (the server's JIT warm).
 */
export async function transcriptGrowth(
  server: Server,
  dir: string,
  runs: number,
  appendBytes: number,
  window: number,
): Promise<TranscriptGrowthWindow[]> {
  const chunk = `${dir}/transcript-turn.jsonl`;
  const lines: string[] = [];
  for (let size = 0, i = 0; size < appendBytes; i++) {
    // Ids and tool output as a real transcript holds them: not all words gzip folds away.
    const text = `turn line ${i}: ${randomBytes(192).toString("base64")} ${"the bridge stores what the CLI appends; ".repeat(6)}`;
    const line = JSON.stringify(assistant(`msg_${i}`, [{ type: "text", text }]));
    lines.push(line);
    size += line.length + 1;
  }
  writeFileSync(chunk, `${lines.join("\n")}\n`);
  const answer = [systemInit("@ID@"), assistant("msg_a", [{ type: "text", text: "Done." }])];
  writeFileSync(
    `${chunk}.answer`,
    [...answer, result({ session_id: "@ID@" })].map((l) => JSON.stringify(l)).join("\n"),
  );
  const turnBytes = statSync(chunk).size;
  // utime, stime, cutime and cstime (children it waited for), in clock ticks of 10 ms.
  const cpuMs = () => {
    const stat = readFileSync(`/proc/${server.pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return [11, 12, 13, 14].reduce((sum, i) => sum + Number(fields[i]), 0) * 10;
  };
  const [warm = "", session = ""] = await createSessions(server.url, 2);
  for (let i = 0; i < window; i++) await post(server, warm, chunk);
  const windows: TranscriptGrowthWindow[] = [];
  let current: { from: number; cpu: number; ms: number[] } | undefined;
  for (let i = 1; i <= runs; i++) {
    const inWindow = i <= window || i > runs - window;
    if (inWindow && !current) current = { from: i, cpu: cpuMs(), ms: [] };
    const t0 = now();
    const res = await post(server, session, chunk);
    expect(res.completionStatus === "succeeded", `transcript run ${i}`, res);
    current?.ms.push(res.endedAt - t0);
    if (current && (i === window || i === runs)) {
      windows.push({
        from: current.from,
        to: i,
        medianMs: median(current.ms),
        cpuMsPerRun: (cpuMs() - current.cpu) / current.ms.length,
        transcriptBytes: i * turnBytes,
      });
      current = undefined;
    }
  }
  return windows;
}
