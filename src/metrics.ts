import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import type { CompletionEvent } from "./events.js";

// The service's Prometheus metrics, served at `GET /metrics`: what runs cost and how they end,
// how fast the event log is stored, the HTTP traffic, and Node's own (event loop lag, heap, GC).
// One set per app, in its own registry: the tests build many apps in one process.

/** What a gauge reads from the run manager when scraped. */
export interface RunCounts {
  running: number;
  queued: number;
  waiting: number;
  subscribers: number;
}

export class Metrics {
  readonly registry = new Registry();

  private readonly runsFinished = new Counter({
    name: "agent_bridge_runs_finished_total",
    help: "Runs that ended, by their completion's status.",
    labelNames: ["status"] as const,
    registers: [this.registry],
  });

  private readonly runSeconds = new Histogram({
    name: "agent_bridge_run_duration_seconds",
    help: "Duration of the finished runs, as their completions report it.",
    buckets: [1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600],
    registers: [this.registry],
  });

  private readonly costUsd = new Counter({
    name: "agent_bridge_cost_usd_total",
    help: "What the finished runs cost, as the CLI reported it.",
    registers: [this.registry],
  });

  private readonly tokens = new Counter({
    name: "agent_bridge_tokens_total",
    help: "Tokens of the finished runs, by kind.",
    labelNames: ["kind"] as const,
    registers: [this.registry],
  });

  private readonly eventsStored = new Counter({
    name: "agent_bridge_events_stored_total",
    help: "Events stored in the runs' logs, completions included (a client sees an event only once it is stored).",
    registers: [this.registry],
  });

  private readonly logWriteSeconds = new Histogram({
    name: "agent_bridge_log_write_duration_seconds",
    help: "Time of one statement storing the event batches of the runs in progress.",
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
    registers: [this.registry],
  });

  private readonly httpRequests = new Counter({
    name: "agent_bridge_http_requests_total",
    help: "HTTP requests, by method, route pattern and status.",
    labelNames: ["method", "route", "status"] as const,
    registers: [this.registry],
  });

  private readonly httpSeconds = new Histogram({
    name: "agent_bridge_http_request_duration_seconds",
    help: "Time to an HTTP response's start (an event stream goes on after it), by route.",
    labelNames: ["method", "route"] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry });
  }

  /** The gauges of runs in progress, read from the run manager when scraped. */
  watchRuns(counts: () => RunCounts): void {
    new Gauge({
      name: "agent_bridge_runs",
      help: "Runs of this process that are not finished, by state.",
      labelNames: ["state"] as const,
      registers: [this.registry],
      collect() {
        const now = counts();
        for (const state of ["running", "queued", "waiting"] as const) {
          this.set({ state }, now[state]);
        }
      },
    });
    new Gauge({
      name: "agent_bridge_run_subscribers",
      help: "Clients following a run's events (event streams, and waits for a JSON answer).",
      registers: [this.registry],
      collect() {
        this.set(counts().subscribers);
      },
    });
  }

  /**
   * A run ended, as it was recorded. What its CLI reported may be anything (a counter throws on a
   * negative step, which took the run's end with it): only what can be counted is.
   */
  runFinished(completion: CompletionEvent): void {
    this.runsFinished.inc({ status: completion.status });
    this.eventsStored.inc();
    this.runSeconds.observe(countable(completion.duration_ms) / 1000);
    this.costUsd.inc(countable(completion.cost_usd));
    const { usage } = completion;
    this.tokens.inc({ kind: "input" }, countable(usage.input_tokens));
    this.tokens.inc({ kind: "output" }, countable(usage.output_tokens));
    this.tokens.inc({ kind: "cache_read" }, countable(usage.cache_read_tokens));
    this.tokens.inc({ kind: "cache_creation" }, countable(usage.cache_creation_tokens));
  }

  logWritten(events: number, seconds: number): void {
    this.eventsStored.inc(events);
    this.logWriteSeconds.observe(seconds);
  }

  httpResponded(method: string, route: string, status: number, seconds: number): void {
    this.httpRequests.inc({ method, route, status: String(status) });
    this.httpSeconds.observe({ method, route }, seconds);
  }
}

/** A count a counter can take: a finite number, not below zero. */
const countable = (n: number | null): number => (n !== null && Number.isFinite(n) && n > 0 ? n : 0);
