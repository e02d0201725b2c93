import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import postgres from "postgres";
import { useApiKey } from "./client.js";
import {
  activeRuns,
  bigLine,
  cliCommand,
  concurrency,
  type FirstEventSample,
  type FollowSample,
  firstEvent,
  follow,
  type GatewayRound,
  gatewayCost,
  idleSubscribers,
  median,
  type RelaySample,
  relay,
  relayWorkload,
  replay,
  restRss,
  type SandboxMemorySample,
  type SandboxSample,
  type Server,
  sandboxCost,
  sandboxMemory,
  sequentialRuns,
  TIMED_WARM_UP,
  type TogetherSample,
  type TranscriptGrowthWindow,
  together,
  transcriptGrowth,
  warmUp,
  wholeWorkload,
} from "./scenarios.js";
import { startBenchServer, startBenchUpstream, startSdkPeer } from "./server.js";
import { type Transcripts, writeTranscripts } from "./transcripts.js";

// `npm run bench`: the measurements of issue 9 against the real server process, on PGlite and,
// when DATABASE_URL is set, on a fresh database of that Postgres server (dropped afterwards);
// relay, first event, together and whole also measure the Agent SDK's `query()` loop
// (bench/sdk-peer.mjs) on the same stand-in CLI (issue 43).
// Prints a table and writes bench/results/<date>.json. Options:
//   --only relay,first,together,whole,concurrency,memory,bigline,replay,follow,cli,sandbox,gateway,
//          transcript
//                                                          a subset (replay needs relay; follow,
//                                                          a second instance, needs Postgres;
//                                                          sandbox needs bubblewrap); its results
//                                                          go to <date>-<subset>.json
//   --backend pglite|postgres                              one back-end only
//   --profile                                              the server runs with --cpu-prof
//                                                          (profiles in bench/results/profiles)
//   --node-flag=FLAG                                       a Node or V8 flag for every server,
//                                                          after npm start's own (repeatable):
//                                                          --node-flag=--max-semi-space-size=16

const SIZES = {
  repeats: 3,
  /** The longer rounds (paced concurrency, 1 000 subscribers) run fewer times, for the time budget. */
  longRepeats: 2,
  firstEventRepeats: 11,
  /** Relays of 10 000 lines or fewer (deltas, whole messages): a few tens of ms each, so more. */
  shortRelayRepeats: 11,
  /**
   * Longer relays: about one run of 100 000 deltas in three has the server's full collection in
   * it (50-100 ms), which a median of three may land on.
   */
  longRelayRepeats: 5,
  relay: (process.env.BENCH_RELAY ?? "10000,100000").split(",").map(Number),
  /** Runs of one transcript at once, on the bridge, in the SDK peer and as bare consumers. */
  togetherRuns: 20,
  togetherDeltas: 10_000,
  /** Whole assistant messages of the transcript without deltas (`claude -p` without partials). */
  wholeMessages: 10_000,
  concurrentRuns: 50,
  concurrentDeltas: 2_000,
  /**
   * Lines per second per run in the paced rounds (10 000 a second over the 50 runs): about twice
   * what a fast model streams, and within what this bridge sustains on a 2-core machine, so the
   * latency measured is the bridge's and not a queue's.
   */
  pacedRate: 200,
  activeRuns: 20,
  subscribers: 1_000,
  sequentialRuns: 1_000,
  bigLineBytes: 64 * 1024 * 1024,
  replayFrom: 50_000,
  /** A run followed on its instance and on another: paced, then as fast as the pipe. */
  followDeltas: 2_000,
  followRate: 500,
  followBurstDeltas: 20_000,
  /** Runs on the servers with and without the sandbox, one after the other. */
  sandboxRepeats: 21,
  /** Runs held open at once for the sandboxes' memory. */
  sandboxHeld: 20,
  /**
   * Runs whose CLI makes one streamed API call, directly and through the model gateway, one after
   * the other: a short answer (for its first byte) and a long one.
   */
  gatewayShortDeltas: 10,
  gatewayShortRepeats: 31,
  gatewayLongDeltas: 100_000,
  gatewayLongRepeats: 5,
  /** One session's runs, one after the other, each CLI run appending to its transcript. */
  transcriptRuns: 200,
  transcriptTurnBytes: 32 * 1024,
  /** The first and last runs compared. */
  transcriptWindow: 10,
} as const;

/** How many times a relay of `lines` is measured. */
const relayRepeats = (lines: number) =>
  lines <= 10_000 ? SIZES.shortRelayRepeats : SIZES.longRelayRepeats;

const TARGETS = {
  /**
   * Issue 43, as ratios to the Agent SDK's loop: relay time and CPU per run, on each back-end;
   * the wall time of runs at once; the first text_delta over the floor.
   */
  sdkRatio: { pglite: 1.5, postgres: 1.3 },
  togetherSdkRatio: 1.3,
  firstDeltaOverFloorMs: 5,
  relayEventsPerSec: 100_000,
  relayRatio: 2,
  firstEventOverFloorMs: 15,
  p99Ms: 50,
  subscriberBytes: 64 * 1024,
  /** Growth over the second half of the sequential runs counted as a leak. */
  leakBytes: 2 * 1024 * 1024,
  bigLineRatio: 2,
  bigLinePeakFactor: 4,
  replayMs: 1_000,
  /** What the run's sandbox may add to its start (issue 38). */
  sandboxAddedMs: 30,
  /** What the model gateway may add to an API call's first byte, and to a long answer (issue 39). */
  gatewayFirstByteAddedMs: 2,
  gatewayStreamRatio: 1.1,
  /** A long session's last runs over its first (issue 43: its per-run cost flat). */
  transcriptGrowthRatio: 1.2,
};

const root = resolve(import.meta.dirname, "..");
const bin = join(root, "bench", "fake-cli.sh");

const { values: args } = parseArgs({
  options: {
    only: { type: "string" },
    backend: { type: "string" },
    profile: { type: "boolean", default: false },
    "node-flag": { type: "string", multiple: true },
  },
});
const nodeFlags = args["node-flag"] ?? [];
/** A server as `npm start` runs it, with the flags the bench was given after its own. */
const startServer = (env: Record<string, string>, flags: string[] = []) =>
  startBenchServer(env, [...flags, ...nodeFlags]);
const only = new Set(
  (
    args.only ??
    "relay,first,together,whole,concurrency,memory,bigline,replay,follow,cli,sandbox,gateway,transcript"
  ).split(","),
);
const wanted = (name: string) => only.has(name);

type Backend = "pglite" | "postgres";
const databaseUrl = process.env.DATABASE_URL;
const backends: Backend[] = (databaseUrl ? ["pglite", "postgres"] : ["pglite"]).filter(
  (b): b is Backend => !args.backend || args.backend === b,
) as Backend[];

/** A fresh database on the DATABASE_URL server; `drop` removes it. */
async function freshDatabase(url: string) {
  const name = `agent_bridge_bench_${randomBytes(5).toString("hex")}`;
  const admin = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`create database ${name}`);
  } finally {
    await admin.end();
  }
  const dbUrl = new URL(url);
  dbUrl.pathname = `/${name}`;
  return {
    url: dbUrl.toString(),
    drop: async () => {
      const sql = postgres(url, { max: 1, onnotice: () => {} });
      try {
        await sql.unsafe(`drop database if exists ${name} with (force)`);
      } finally {
        await sql.end();
      }
    },
  };
}

// biome-ignore lint/suspicious/noExplicitAny: results are plain JSON of many shapes
type Results = Record<string, any>;

/** The variables of `env` among `names` that are set. */
function pick(env: NodeJS.ProcessEnv, names: string[]): Record<string, string> {
  return Object.fromEntries(names.flatMap((n) => (env[n] ? [[n, env[n] as string]] : [])));
}

async function benchBackend(backend: Backend, transcripts: Transcripts, tmp: string) {
  const dataDir = join(tmp, `data-${backend}`);
  const database =
    backend === "postgres" && databaseUrl ? await freshDatabase(databaseUrl) : undefined;
  const profileDir = join(root, "bench", "results", "profiles");
  if (args.profile) mkdirSync(profileDir, { recursive: true });
  const memoryFile = join(tmp, `memory-${backend}.json`);
  const apiKey = `ab_${randomBytes(32).toString("base64url")}`;
  useApiKey(apiKey);
  const env = {
    LOG_LEVEL: "warn",
    // Keys on, as in production, with the per-key limits out of the way of the bench's load.
    AGENT_BRIDGE_API_KEY: apiKey,
    BENCH_MEMORY_FILE: memoryFile,
    AGENT_BRIDGE_RATE_LIMIT_PER_MINUTE: "1000000",
    AGENT_BRIDGE_MAX_RUNS_PER_KEY: "1000",
    // The idle-subscriber round holds 1 000 streams of one key.
    AGENT_BRIDGE_MAX_STREAMS_PER_KEY: "2000",
    AGENT_BRIDGE_DATA_DIR: dataDir,
    ...(database ? { DATABASE_URL: database.url } : {}),
    AGENT_BRIDGE_CLAUDE_BIN: bin,
    AGENT_BRIDGE_MAX_CONCURRENT_RUNS: "100",
    AGENT_BRIDGE_MAX_QUEUED_RUNS: "100",
    AGENT_BRIDGE_MAX_LINE_BYTES: String(2 * SIZES.bigLineBytes),
    // The bridge's own figures, comparable across rounds; the sandbox's cost is a round of its own.
    AGENT_BRIDGE_SANDBOX: "off",
    // Tracing, spans per event among it, measured when the bench's environment turns them on.
    ...pick(process.env, ["OTEL_EXPORTER_OTLP_ENDPOINT", "AGENT_BRIDGE_TRACE_EVENTS"]),
  };
  const proc = await startServer(env, [
    "--expose-gc",
    "--import",
    join(root, "bench", "gc-probe.mjs"),
    ...(args.profile ? ["--cpu-prof", `--cpu-prof-dir=${profileDir}`] : []),
  ]);
  const server: Server = {
    url: proc.url,
    pid: proc.child.pid ?? 0,
    bin,
    transcripts,
    memoryFile,
  };
  const peer = startSdkPeer(bin);
  const out: Results = {};
  // How long each step took, so that the sizes can be kept within the time budget.
  const steps: Record<string, number> = {};
  let current: { name: string; at: number } | undefined;
  const step = (name?: string) => {
    if (current) steps[current.name] = Math.round(performance.now() - current.at) / 1000;
    current = name ? { name, at: performance.now() } : undefined;
    if (name) process.stderr.write(`[${backend}] ${name}…\n`);
  };
  out.steps = steps;
  out.startMs = proc.startMs;
  try {
    step("warm-up");
    await warmUp(server, peer);
    out.restRss = await restRss(server);
    // Measured first, while little garbage of earlier steps is left to be freed meanwhile.
    if (wanted("memory")) {
      step("memory: active runs");
      out.activeRuns = await activeRuns(server, SIZES.activeRuns, SIZES.repeats);
      step("memory: idle subscribers");
      out.idleSubscribers = await idleSubscribers(server, SIZES.subscribers, SIZES.longRepeats);
    }
    // Warmer for the timed rounds, and after the memory figures' forced collections, each of which
    // costs the next few runs their JIT's work again (docs/performance.md): they start from a
    // server warm as one in use is.
    step("warm-up for the timed rounds");
    await warmUp(server, peer, TIMED_WARM_UP);
    if (wanted("first")) {
      step("first event");
      out.firstEvent = await firstEvent(server, peer, SIZES.firstEventRepeats);
    }
    let lastBig: RelaySample | undefined;
    if (wanted("relay") || wanted("replay")) {
      out.relay = {};
      for (const n of SIZES.relay) {
        step(`relay ${n}`);
        out.relay[n] = await relay(server, peer, relayWorkload(server, n), relayRepeats(n));
        lastBig = out.relay[n].at(-1);
      }
    }
    if (wanted("together")) {
      const { togetherRuns: runs, togetherDeltas: deltas } = SIZES;
      step(`${runs} runs of ${deltas} deltas at once`);
      const workload = relayWorkload(server, deltas);
      out.together = await together(server, peer, workload, runs, SIZES.repeats);
    }
    if (wanted("whole")) {
      step(`${SIZES.wholeMessages} whole assistant messages`);
      const workload = wholeWorkload(server, SIZES.wholeMessages);
      out.whole = await relay(server, peer, workload, relayRepeats(SIZES.wholeMessages));
    }
    if (wanted("replay") && lastBig) {
      step("replay");
      const total = Math.max(...SIZES.relay) + 2;
      out.replay = await replay(server, lastBig.runId, SIZES.replayFrom, total, SIZES.repeats);
    }
    if (wanted("bigline")) {
      step("64 MB line");
      out.bigLine = await bigLine(server, SIZES.repeats);
    }
    if (wanted("concurrency")) {
      const { concurrentRuns: runs, concurrentDeltas: deltas } = SIZES;
      step(`concurrency ${runs} x ${deltas}, as fast as the pipe`);
      out.concurrencyBurst = await concurrency(server, runs, deltas, 0, SIZES.repeats);
      step(`concurrency ${runs} x ${deltas}, ${SIZES.pacedRate} lines/s per run`);
      out.concurrencyPaced = await concurrency(
        server,
        runs,
        deltas,
        SIZES.pacedRate,
        SIZES.longRepeats,
      );
    }
    if (wanted("memory")) {
      step(`memory: ${SIZES.sequentialRuns} sequential runs`);
      out.sequential = await sequentialRuns(server, SIZES.sequentialRuns);
    }
    if (wanted("cli")) {
      step("command line");
      out.cli = await cliCommand(server, apiKey, SIZES.repeats);
    }
    if (wanted("sandbox")) {
      step("sandbox: a second server, each run sandboxed");
      // Its runs work in the bench's temp dir, where the transcripts are: the sandbox shows a run
      // its work dir, and hides the rest of that dir (its data dir there too).
      // A credential in its environment: the CLI then calls through the gateway (this one never
      // does), so each sandbox has its network of its own, with socat serving the gateway in it.
      const sandboxed = await startServer({
        ...env,
        ANTHROPIC_API_KEY: "bench-never-used",
        AGENT_BRIDGE_SANDBOX: "on",
        AGENT_BRIDGE_WORK_DIR: tmp,
        AGENT_BRIDGE_DATA_DIR: `${dataDir}-sandboxed`,
        BENCH_MEMORY_FILE: `${memoryFile}.sandboxed`,
      });
      try {
        const other: Server = { ...server, url: sandboxed.url, pid: sandboxed.child.pid ?? 0 };
        await warmUp(other);
        step(`sandbox: run start to first text_delta, with and without`);
        out.sandbox = await sandboxCost(server, other, SIZES.sandboxRepeats);
        step(`sandbox: memory of ${SIZES.sandboxHeld} held runs' sandboxes`);
        out.sandboxMemory = await sandboxMemory(other, SIZES.sandboxHeld, SIZES.repeats);
      } finally {
        await sandboxed.stop();
      }
    }
    if (wanted("gateway")) {
      step("gateway: a server whose CLIs call the upstream, one whose CLIs call its gateway");
      out.gateway = await gatewayRounds(env, dataDir, tmp, transcripts);
    }
    if (wanted("transcript")) {
      step(
        `transcript: ${SIZES.transcriptRuns} runs of one session, each appending ${kb(SIZES.transcriptTurnBytes)}`,
      );
      // A server of its own, whose stand-in CLI writes a transcript where the bridge finds it.
      const appending = await startServer({
        ...env,
        AGENT_BRIDGE_CLAUDE_BIN: join(root, "bench", "fake-appending-cli.sh"),
        CLAUDE_CONFIG_DIR: join(tmp, `claude-${backend}`),
        AGENT_BRIDGE_DATA_DIR: `${dataDir}-transcript`,
        BENCH_MEMORY_FILE: `${memoryFile}.transcript`,
      });
      try {
        const other: Server = { ...server, url: appending.url, pid: appending.child.pid ?? 0 };
        out.transcriptGrowth = await transcriptGrowth(
          other,
          tmp,
          SIZES.transcriptRuns,
          SIZES.transcriptTurnBytes,
          SIZES.transcriptWindow,
        );
      } finally {
        await appending.stop();
      }
    }
    if (wanted("follow") && database) {
      step("follow: a second instance");
      const second = await startServer({ ...env, BENCH_MEMORY_FILE: `${memoryFile}.2` });
      try {
        const other: Server = { ...server, url: second.url, pid: second.child.pid ?? 0 };
        step(`follow ${SIZES.followDeltas} at ${SIZES.followRate} lines/s`);
        out.followPaced = await follow(
          server,
          other,
          SIZES.followDeltas,
          SIZES.followRate,
          SIZES.repeats,
        );
        step(`follow ${SIZES.followBurstDeltas}, as fast as the pipe`);
        out.followBurst = await follow(server, other, SIZES.followBurstDeltas, 0, SIZES.repeats);
      } finally {
        await second.stop();
      }
    }
    step();
  } catch (err) {
    process.stderr.write(`server output:\n${proc.output().slice(-4000)}\n`);
    throw err;
  } finally {
    await peer.stop();
    await proc.stop();
    await database?.drop();
  }
  return out;
}

/**
 * The model gateway's cost: two fresh servers on the same back-end and settings, the bench's
 * upstream as their ANTHROPIC_BASE_URL; one without a credential (no gateway: its CLIs call the
 * upstream themselves), one with (its CLIs call its gateway with their run's token).
 */
async function gatewayRounds(
  env: Record<string, string>,
  dataDir: string,
  tmp: string,
  transcripts: Transcripts,
): Promise<Results> {
  const running: { stop(): Promise<void> }[] = [];
  try {
    const upstream = await startBenchUpstream();
    running.push(upstream);
    const operatorKey = `bench-operator-${randomBytes(8).toString("hex")}`;
    const server = async (name: string, extra: Record<string, string> = {}): Promise<Server> => {
      const proc = await startServer({
        ...env,
        ANTHROPIC_BASE_URL: upstream.url,
        ...extra,
        AGENT_BRIDGE_DATA_DIR: `${dataDir}-${name}`,
        BENCH_MEMORY_FILE: join(tmp, `memory-${name}.json`),
      });
      running.push(proc);
      return { url: proc.url, pid: proc.child.pid ?? 0, bin, transcripts, memoryFile: "" };
    };
    const direct = await server("direct");
    const gateway = await server("gateway", { ANTHROPIC_API_KEY: operatorKey });
    await Promise.all([warmUp(direct), warmUp(gateway)]);
    const round = (deltas: number, reps: number) =>
      gatewayCost(direct, gateway, upstream, operatorKey, tmp, deltas, reps);
    // Each side's first API calls (and the JIT of the gateway's code) left out.
    await round(SIZES.gatewayShortDeltas, 4);
    return {
      short: await round(SIZES.gatewayShortDeltas, SIZES.gatewayShortRepeats),
      long: await round(SIZES.gatewayLongDeltas, SIZES.gatewayLongRepeats),
    };
  } finally {
    for (const proc of running.reverse()) await proc.stop();
  }
}

// --- summary -------------------------------------------------------------------------------

const med = <T>(xs: T[] | undefined, f: (x: T) => number) => (xs ? median(xs.map(f)) : undefined);
const num = (x: number, digits = 0) =>
  x.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
const ms = (x: number) => `${num(x, x < 10 ? 2 : 1)} ms`;
const kb = (x: number) => `${num(x / 1024, 1)} KB`;
const mb = (x: number) => `${num(x / 1024 / 1024, 1)} MB`;
const mark = (ok: boolean) => (ok ? " ✓" : " ✗");
/** A difference in ms, with its sign. */
const added = (x: number) => `${x < 0 ? "−" : "+"}${ms(Math.abs(x))}`;

interface Row {
  measure: string;
  target: string;
  cell: (r: Results, backend: Backend) => { text: string; ok?: boolean } | undefined;
}

const sdkTarget = `≤ ${TARGETS.sdkRatio.postgres}x the SDK (postgres), ${TARGETS.sdkRatio.pglite}x (pglite)`;

/**
 * One measure of the bridge, the Agent SDK's loop and the floor, as ratios: the bridge's to the
 * SDK's (against `limit`, when given), and the bridge's and the SDK's to the floor's.
 */
function versusSdk(
  samples: Record<"bridge" | "sdk" | "floor", number>[] | undefined,
  limit?: number,
): { text: string; ok?: boolean } | undefined {
  const b = med(samples, (x) => x.bridge);
  const sdk = med(samples, (x) => x.sdk);
  const f = med(samples, (x) => x.floor);
  if (b === undefined || sdk === undefined || f === undefined) return undefined;
  const text = `${num(b / sdk, 2)}x (${ms(b)} / ${ms(sdk)}); to the floor (${ms(f)}): ${num(b / f, 2)}x, SDK ${num(sdk / f, 2)}x`;
  return limit === undefined ? { text } : { text, ok: b / sdk <= limit };
}

/** The relay samples of `n` deltas, as bridge / SDK / floor figures of `kind`. */
const relayFigures = (r: Results, n: number, kind: "Ms" | "CpuMs") =>
  (r.relay?.[n] as RelaySample[] | undefined)?.map((x) => ({
    bridge: x[`bridge${kind}`],
    sdk: x[`sdk${kind}`],
    floor: x[`floor${kind}`],
  }));

/** Issue 43's rows: the bridge against the Agent SDK's own loop, each with the floor. */
const sdkRows: Row[] = [
  ...SIZES.relay.map(
    (n): Row => ({
      measure: `relay ${num(n)} lines: time, bridge / SDK query() (to the floor)`,
      target: sdkTarget,
      cell: (r, backend) => versusSdk(relayFigures(r, n, "Ms"), TARGETS.sdkRatio[backend]),
    }),
  ),
  {
    measure: `CPU per ${num(Math.max(...SIZES.relay))}-delta run, bridge server / SDK process (to the floor's process); the CLI's not counted`,
    target: sdkTarget,
    cell: (r, backend) =>
      versusSdk(relayFigures(r, Math.max(...SIZES.relay), "CpuMs"), TARGETS.sdkRatio[backend]),
  },
  {
    measure: "first text_delta over the floor: bridge (SDK query())",
    target: `≤ +${TARGETS.firstDeltaOverFloorMs} ms`,
    cell: (r) => {
      const s = r.firstEvent as FirstEventSample[] | undefined;
      const b = med(s, (x) => x.firstDeltaMs);
      const sdk = med(s, (x) => x.sdkFirstDeltaMs);
      const f = med(s, (x) => x.floorMs);
      if (b === undefined || sdk === undefined || f === undefined) return undefined;
      return {
        text: `+${ms(b - f)} (SDK ${added(sdk - f)}; ${ms(b)} / ${ms(sdk)} / ${ms(f)})`,
        ok: b - f <= TARGETS.firstDeltaOverFloorMs,
      };
    },
  },
  {
    measure: `${SIZES.togetherRuns} runs of ${num(SIZES.togetherDeltas)} deltas at once, wall time: bridge / SDK (to the floor)`,
    target: `≤ ${TARGETS.togetherSdkRatio}x the SDK`,
    cell: (r) =>
      versusSdk(
        (r.together as TogetherSample[] | undefined)?.map((x) => ({
          bridge: x.bridgeMs,
          sdk: x.sdkMs,
          floor: x.floorMs,
        })),
        TARGETS.togetherSdkRatio,
      ),
  },
  {
    measure: `${num(SIZES.wholeMessages)} whole assistant lines, no deltas: events/s (SDK messages/s; floor lines/s)`,
    target: "",
    cell: (r) => {
      const s = r.whole as RelaySample[] | undefined;
      const b = med(s, (x) => x.eventsPerSec);
      const sdk = med(s, (x) => x.sdkMessagesPerSec);
      const f = med(s, (x) => x.floorLinesPerSec);
      if (b === undefined || sdk === undefined || f === undefined) return undefined;
      return { text: `${num(b)} (${num(sdk)}; ${num(f)})` };
    },
  },
  {
    measure: `${num(SIZES.wholeMessages)} whole assistant lines: time, bridge / SDK (to the floor)`,
    target: "",
    cell: (r) =>
      versusSdk(
        (r.whole as RelaySample[] | undefined)?.map((x) => ({
          bridge: x.bridgeMs,
          sdk: x.sdkMs,
          floor: x.floorMs,
        })),
      ),
  },
];

const rows: Row[] = [
  ...SIZES.relay.flatMap((n): Row[] => [
    {
      measure: `relay ${num(n)} lines: events/s (floor lines/s)`,
      target: `≥ ${num(TARGETS.relayEventsPerSec)}`,
      cell: (r) => {
        const v = med(r.relay?.[n] as RelaySample[], (s) => s.eventsPerSec);
        const f = med(r.relay?.[n] as RelaySample[], (s) => s.floorLinesPerSec);
        if (v === undefined || f === undefined) return undefined;
        return { text: `${num(v)} (${num(f)})`, ok: v >= TARGETS.relayEventsPerSec };
      },
    },
    {
      measure: `relay ${num(n)} lines: time, bridge / floor`,
      target: `≤ ${TARGETS.relayRatio}x`,
      cell: (r) => {
        const b = med(r.relay?.[n] as RelaySample[], (s) => s.bridgeMs);
        const f = med(r.relay?.[n] as RelaySample[], (s) => s.floorMs);
        if (b === undefined || f === undefined) return undefined;
        return {
          text: `${num(b / f, 2)}x (${ms(b)} / ${ms(f)})`,
          ok: b / f <= TARGETS.relayRatio,
        };
      },
    },
  ]),
  ...sdkRows,
  {
    measure: "first SSE byte (floor: spawn, first line)",
    target: "",
    cell: (r) => {
      const b = med(r.firstEvent, (s: { firstByteMs: number }) => s.firstByteMs);
      const f = med(r.firstEvent, (s: { floorMs: number }) => s.floorMs);
      return b === undefined || f === undefined ? undefined : { text: `${ms(b)} (${ms(f)})` };
    },
  },
  {
    measure: "first text_delta, over the floor",
    target: `≤ +${TARGETS.firstEventOverFloorMs} ms`,
    cell: (r) => {
      const b = med(r.firstEvent, (s: { firstDeltaMs: number }) => s.firstDeltaMs);
      const f = med(r.firstEvent, (s: { floorMs: number }) => s.floorMs);
      if (b === undefined || f === undefined) return undefined;
      return {
        text: `+${ms(b - f)} (${ms(b)})`,
        ok: b - f <= TARGETS.firstEventOverFloorMs,
      };
    },
  },
  ...(["Burst", "Paced"] as const).flatMap((kind): Row[] => {
    const label =
      kind === "Burst"
        ? `${SIZES.concurrentRuns} runs x ${num(SIZES.concurrentDeltas)}, as fast as the pipe`
        : `${SIZES.concurrentRuns} runs x ${num(SIZES.concurrentDeltas)}, ${SIZES.pacedRate} lines/s each`;
    const key = `concurrency${kind}`;
    return [
      {
        measure: `${label}: events/s`,
        target: "",
        cell: (r) => {
          const v = med(r[key], (s: { eventsPerSec: number }) => s.eventsPerSec);
          return v === undefined ? undefined : { text: num(v) };
        },
      },
      {
        measure: `${label}: latency p50 / p99, all delivered in order`,
        target: `p99 < ${TARGETS.p99Ms} ms`,
        cell: (r) => {
          const p50 = med(r[key], (s: { p50Ms: number }) => s.p50Ms);
          const p99 = med(r[key], (s: { p99Ms: number }) => s.p99Ms);
          if (p50 === undefined || p99 === undefined) return undefined;
          return { text: `${ms(p50)} / ${ms(p99)}`, ok: p99 < TARGETS.p99Ms };
        },
      },
    ];
  }),
  {
    measure: "`agent-bridge sessions ls`, start to exit (floor: `node -e 0`)",
    target: "",
    cell: (r) => {
      const c = med(r.cli, (s: { commandMs: number }) => s.commandMs);
      const f = med(r.cli, (s: { floorMs: number }) => s.floorMs);
      return c === undefined || f === undefined ? undefined : { text: `${ms(c)} (${ms(f)})` };
    },
  },
  {
    measure: "server start-up, spawn to first `/healthz` 200 (new data dir or database)",
    target: "",
    cell: (r) => (r.startMs === undefined ? undefined : { text: ms(r.startMs) }),
  },
  {
    measure: "server RSS at rest",
    target: "",
    cell: (r) => (r.restRss === undefined ? undefined : { text: mb(r.restRss) }),
  },
  {
    measure: `RSS per active run, its CLI aside (${SIZES.activeRuns} held open)`,
    target: "",
    cell: (r) => {
      const v = med(r.activeRuns, (s: { perRunBytes: number }) => s.perRunBytes);
      const h = med(r.activeRuns, (s: { perRunHeapBytes: number }) => s.perRunHeapBytes);
      return v === undefined || h === undefined ? undefined : { text: `${kb(v)} (heap ${kb(h)})` };
    },
  },
  {
    measure: `RSS per idle SSE subscriber (${num(SIZES.subscribers)})`,
    target: `< ${kb(TARGETS.subscriberBytes)}`,
    cell: (r) => {
      const v = med(r.idleSubscribers, (s: { perSubscriberBytes: number }) => s.perSubscriberBytes);
      const h = med(
        r.idleSubscribers,
        (s: { perSubscriberHeapBytes: number }) => s.perSubscriberHeapBytes,
      );
      if (v === undefined || h === undefined) return undefined;
      return { text: `${kb(v)} (heap ${kb(h)})`, ok: v < TARGETS.subscriberBytes };
    },
  },
  // A leak shows in the heap after a full collection. RSS is shown too, but with PGlite it holds
  // the embedded database's caches, which fill as its data grows.
  ...(["rss", "heap"] as const).map((kind) => ({
    measure: `${kind === "rss" ? "RSS" : "heap and buffers after GC"} over ${num(SIZES.sequentialRuns)} sequential runs (0 / ½ / all)`,
    target: kind === "heap" ? `½ → all < ${mb(TARGETS.leakBytes)}` : "",
    cell: (r: Results) => {
      const s = r.sequential as ({ runs: number } & Record<typeof kind, number>)[] | undefined;
      if (!s) return undefined;
      const first = s[0]?.[kind] ?? 0;
      const half = s.find((x) => x.runs === SIZES.sequentialRuns / 2)?.[kind] ?? 0;
      const last = s.at(-1)?.[kind] ?? 0;
      const text = `${mb(first)} / ${mb(half)} / ${mb(last)}`;
      return kind === "heap" ? { text, ok: last - half < TARGETS.leakBytes } : { text };
    },
  })),
  {
    measure: "64 MB line: bridge / JSON.parse",
    target: `≤ ${TARGETS.bigLineRatio}x`,
    cell: (r) => {
      const b = med(r.bigLine, (s: { bridgeMs: number }) => s.bridgeMs);
      const p = med(r.bigLine, (s: { parseMs: number }) => s.parseMs);
      if (b === undefined || p === undefined) return undefined;
      return { text: `${num(b / p, 2)}x (${ms(b)} / ${ms(p)})`, ok: b / p <= TARGETS.bigLineRatio };
    },
  },
  {
    measure: "64 MB line: peak RSS above rest (absolute)",
    target: `< ${TARGETS.bigLinePeakFactor}x the line`,
    cell: (r) => {
      const peak = med(
        r.bigLine,
        (s: { peakRss: number; restRss: number }) => s.peakRss - s.restRss,
      );
      const abs = med(r.bigLine, (s: { peakRss: number }) => s.peakRss);
      const line = r.bigLine?.[0]?.lineBytes as number | undefined;
      if (peak === undefined || abs === undefined || !line) return undefined;
      return {
        text: `${num(peak / line, 2)}x: ${mb(peak)} (${mb(abs)})`,
        ok: peak < TARGETS.bigLinePeakFactor * line,
      };
    },
  },
  {
    measure: `a follower on another instance, ${num(SIZES.followDeltas)} deltas at ${SIZES.followRate}/s: latency p50 / p99 (on the run's own instance)`,
    target: "",
    cell: (r) => {
      const s = r.followPaced as FollowSample[] | undefined;
      if (!s) return undefined;
      const p = (side: "local" | "remote", k: "p50Ms" | "p99Ms") =>
        ms(med(s, (x) => x[side][k]) ?? Number.NaN);
      return {
        text: `${p("remote", "p50Ms")} / ${p("remote", "p99Ms")} (${p("local", "p50Ms")} / ${p("local", "p99Ms")})`,
      };
    },
  },
  {
    measure: `a follower on another instance, ${num(SIZES.followBurstDeltas)} deltas as fast as the pipe: events/s (on the run's own instance)`,
    target: "",
    cell: (r) => {
      const s = r.followBurst as FollowSample[] | undefined;
      if (!s) return undefined;
      const v = (side: "local" | "remote") =>
        num(med(s, (x) => x[side].eventsPerSec) ?? Number.NaN);
      return { text: `${v("remote")} (${v("local")})` };
    },
  },
  {
    measure: "run start to first text_delta, sandboxed / not (added)",
    target: `≤ +${TARGETS.sandboxAddedMs} ms`,
    cell: (r) => {
      const s = r.sandbox as SandboxSample[] | undefined;
      const boxed = med(s, (x) => x.sandboxedMs);
      const plain = med(s, (x) => x.plainMs);
      // Of each pair, run one after the other: steadier than the difference of the medians on a
      // machine whose load changes.
      const added = med(s, (x) => x.sandboxedMs - x.plainMs);
      if (boxed === undefined || plain === undefined || added === undefined) return undefined;
      return {
        text: `${num(boxed / plain, 2)}x (+${ms(added)}: ${ms(boxed)} / ${ms(plain)})`,
        ok: added <= TARGETS.sandboxAddedMs,
      };
    },
  },
  {
    measure: `a run's sandbox processes, RSS (PSS) (${SIZES.sandboxHeld} held open)`,
    target: "",
    cell: (r) => {
      const s = r.sandboxMemory as SandboxMemorySample[] | undefined;
      const rss = med(s, (x) => x.perRunRss);
      const pss = med(s, (x) => x.perRunPss);
      return rss === undefined || pss === undefined
        ? undefined
        : { text: `${kb(rss)} (${kb(pss)})` };
    },
  },
  {
    measure: `an API call's first byte at the CLI, through the gateway / directly (added; ${num(SIZES.gatewayShortDeltas)} deltas)`,
    target: `≤ +${TARGETS.gatewayFirstByteAddedMs} ms`,
    cell: (r) => {
      const g = r.gateway?.short as GatewayRound | undefined;
      if (!g) return undefined;
      const via = med(g.pairs, (p) => p.gateway.firstByteMs) ?? Number.NaN;
      const direct = med(g.pairs, (p) => p.direct.firstByteMs) ?? Number.NaN;
      const more = med(g.pairs, (p) => p.gateway.firstByteMs - p.direct.firstByteMs) ?? Number.NaN;
      return {
        text: `${added(more)} (${ms(via)} / ${ms(direct)})`,
        ok: more <= TARGETS.gatewayFirstByteAddedMs,
      };
    },
  },
  {
    measure: "POST to first text_delta, through the gateway / directly (added)",
    target: "",
    cell: (r) => {
      const g = r.gateway?.short as GatewayRound | undefined;
      if (!g) return undefined;
      const via = med(g.pairs, (p) => p.gateway.firstDeltaMs) ?? Number.NaN;
      const direct = med(g.pairs, (p) => p.direct.firstDeltaMs) ?? Number.NaN;
      const more =
        med(g.pairs, (p) => p.gateway.firstDeltaMs - p.direct.firstDeltaMs) ?? Number.NaN;
      return { text: `${added(more)} (${ms(via)} / ${ms(direct)})` };
    },
  },
  {
    measure: `a ${num(SIZES.gatewayLongDeltas)}-delta answer, POST to completion, through the gateway / directly`,
    target: `≤ ${TARGETS.gatewayStreamRatio}x`,
    cell: (r) => {
      const g = r.gateway?.long as GatewayRound | undefined;
      if (!g) return undefined;
      const via = med(g.pairs, (p) => p.gateway.totalMs) ?? Number.NaN;
      const direct = med(g.pairs, (p) => p.direct.totalMs) ?? Number.NaN;
      const ratio = med(g.pairs, (p) => p.gateway.totalMs / p.direct.totalMs) ?? Number.NaN;
      return {
        text: `${num(ratio, 2)}x (${ms(via)} / ${ms(direct)})`,
        ok: ratio <= TARGETS.gatewayStreamRatio,
      };
    },
  },
  ...(["short", "long"] as const).map(
    (kind): Row => ({
      measure: `server CPU per call, through the gateway / directly (added; ${num(kind === "short" ? SIZES.gatewayShortDeltas : SIZES.gatewayLongDeltas)} deltas)`,
      target: "",
      cell: (r) => {
        const g = r.gateway?.[kind] as GatewayRound | undefined;
        if (!g) return undefined;
        const { gateway: via, direct } = g.cpuMsPerCall;
        return { text: `${added(via - direct)} (${ms(via)} / ${ms(direct)})` };
      },
    }),
  ),
  {
    measure: `a ${SIZES.transcriptRuns}-run session, ${kb(SIZES.transcriptTurnBytes)} of transcript a run: CPU per run (server and its children), its last ${SIZES.transcriptWindow} runs / its first (POST to completion)`,
    target: `≤ ${TARGETS.transcriptGrowthRatio}x`,
    cell: (r) => {
      const [first, last] = (r.transcriptGrowth ?? []) as TranscriptGrowthWindow[];
      if (!first || !last) return undefined;
      const ratio = last.cpuMsPerRun / first.cpuMsPerRun;
      return {
        text: `${num(ratio, 2)}x: ${ms(last.cpuMsPerRun)} / ${ms(first.cpuMsPerRun)} (${num(last.medianMs / first.medianMs, 2)}x: ${ms(last.medianMs)} / ${ms(first.medianMs)}; ${mb(last.transcriptBytes)} at the end)`,
        ok: ratio <= TARGETS.transcriptGrowthRatio,
      };
    },
  },
  {
    measure: `replay from Last-Event-ID ${num(SIZES.replayFrom)} to the end`,
    target: `< ${ms(TARGETS.replayMs)}`,
    cell: (r) => {
      const v = med(r.replay, (s: { ms: number }) => s.ms);
      return v === undefined ? undefined : { text: ms(v), ok: v < TARGETS.replayMs };
    },
  },
];

function table(results: Partial<Record<Backend, Results>>): string {
  const names = Object.keys(results) as Backend[];
  const lines = [
    `| measure | target | ${names.join(" | ")} |`,
    `|---|---|${names.map(() => "---").join("|")}|`,
  ];
  for (const row of rows) {
    const cells = names.map((b) => {
      const c = row.cell(results[b] ?? {}, b);
      return c ? `${c.text}${c.ok === undefined ? "" : mark(c.ok)}` : "";
    });
    if (cells.every((c) => c === "")) continue;
    lines.push(`| ${row.measure} | ${row.target} | ${cells.join(" | ")} |`);
  }
  return lines.join("\n");
}

// --- main ----------------------------------------------------------------------------------

const machine = {
  cpus: os.cpus().length,
  cpu_model: os.cpus()[0]?.model ?? "unknown",
  memory_bytes: os.totalmem(),
  node: process.version,
  platform: `${os.platform()} ${os.release()}`,
  load_average_at_start: os.loadavg(),
  server_node_flags: nodeFlags,
};
const startedAt = new Date();
const tmp = mkdtempSync(join(os.tmpdir(), "agent-bridge-bench-"));
const results: Partial<Record<Backend, Results>> = {};
try {
  process.stderr.write("writing transcripts…\n");
  const transcripts = await writeTranscripts(
    tmp,
    [...new Set([...SIZES.relay, SIZES.togetherDeltas])],
    [SIZES.wholeMessages],
    SIZES.bigLineBytes,
  );
  for (const backend of backends) results[backend] = await benchBackend(backend, transcripts, tmp);
} finally {
  rmSync(tmp, { recursive: true, force: true });
}

const seconds = (Date.now() - startedAt.getTime()) / 1000;
const text = table(results);
const header = `${machine.cpus} × ${machine.cpu_model}, ${mb(machine.memory_bytes)}, Node ${machine.node}, ${machine.platform}; load average at start ${machine.load_average_at_start.map((x) => x.toFixed(2)).join(" ")}${nodeFlags.length > 0 ? `; the server with ${nodeFlags.join(" ")}` : ""}`;
process.stdout.write(
  `\n${header}\nmedians of ${SIZES.repeats} (first event: ${SIZES.firstEventRepeats}; relays: ${SIZES.shortRelayRepeats} of up to 10 000 lines, ${SIZES.longRelayRepeats} longer; sandbox cost: ${SIZES.sandboxRepeats}; gateway: ${SIZES.gatewayShortRepeats} short and ${SIZES.gatewayLongRepeats} long pairs; paced concurrency and subscribers: ${SIZES.longRepeats}); ${num(seconds, 0)} s in all\n\n${text}\n`,
);
const resultsDir = join(root, "bench", "results");
mkdirSync(resultsDir, { recursive: true });
const file = join(
  resultsDir,
  `${startedAt.toISOString().slice(0, 10)}${args.only ? `-${[...only].join("-")}` : ""}.json`,
);
writeFileSync(
  file,
  `${JSON.stringify({ started_at: startedAt.toISOString(), seconds, machine, sizes: SIZES, targets: TARGETS, table: text, results }, null, 2)}\n`,
);
process.stdout.write(`\nwritten to ${file}\n`);
