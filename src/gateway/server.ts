import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { SHARE_ENV, Worker } from "node:worker_threads";
import { errorText, type Logger } from "../log.js";
import { costOf, type PriceTable, priceOf } from "../prices.js";
import type { Database } from "../store/db.js";
import { type MeteredUsage, meteredUsage, recordModelCall } from "../store/model-calls.js";
import { withDbRetries } from "../store/retry.js";
import type { Admission, CallAdmission, CallRefusal } from "./admission.js";
import type { ModelApi } from "./api.js";
import type { EgressLists } from "./egress.js";
import type { MeteredCall } from "./forward.js";
import type { HostCalls, ServedRun, WorkerCalls } from "./gateway-server.js";
import { Rpc } from "./rpc.js";
import { newRunToken } from "./tokens.js";
import type { ServedApi } from "./worker.js";

// The model gateway: the model APIs as each instance serves them to the CLIs of the runs it
// executes. A run's CLI is given the gateway's address and a token of its run's instead of the
// operator's credential (./tokens.ts); the gateway checks the token, forwards the call with the
// real credential (./forward.ts), and records what each call spent against its run
// (src/store/model-calls.ts). It listens on a loopback port of its own, chosen at start-up, apart
// from the public API: that one may sit behind a proxy and carries API keys, this one carries
// only runs' tokens and is for processes on this machine. A sandboxed run, which has no network
// of its own, reaches it through a Unix socket of its own bound into its sandbox and served there
// on the same port number (./run-sockets.ts, src/process/sandbox.ts); there the gateway is also
// the run's only way out, a proxy that lets through what its key's egress list allows
// (./egress.ts).
//
// All of that runs in a thread of its own (./worker.ts, ./gateway-server.ts), started as the
// gateway first listens: in the server's main thread a call waited for whatever that thread was
// doing as it came (a run's start, and every query of the embedded database, which runs there
// synchronously). This thread keeps what rests on the database: each call's admission
// (./admission.ts) and record, which the gateway's thread asks for by message, and each run's
// egress lists. A gateway thread that dies is started again on the same port, serving the runs it
// served (their calls under way are cut, as by an upstream that fell over).

/** The longest an answer's end waits for its call's record: far more than a write takes. */
const RECORD_WAIT_MS = 5000;

/** Where the gateway listens for CLIs outside a sandbox. */
export interface GatewayAddress {
  /** `http://127.0.0.1:PORT` */
  url: string;
  port: number;
}

/** Where a run's CLI reaches one API, and with what. */
export interface RunAccess {
  /** The API's base URL at the gateway (`http://127.0.0.1:PORT/anthropic`). */
  baseUrl: string;
  /** The run's token: good for this run's calls, at this gateway, until `close`. */
  token: string;
  /** The run's own Unix socket to the gateway, for its sandbox. */
  socket: string;
  /** The run is over: its token is worth nothing from now on, its socket is gone. */
  close(): void;
  /** Resolves once the records of its calls over so far are written (or given up). */
  recorded(): Promise<void>;
  /** The latest of its calls that the gateway refused (./admission.ts), if any was. */
  refusal(): CallRefusal | undefined;
  /** What its calls recorded so far add up to. */
  metered(): Promise<MeteredUsage>;
}

export interface ModelGatewayOptions {
  /** The APIs served, each under its prefix. */
  apis: ModelApi[];
  db: Database;
  logger: Logger;
  /** How long the record of a call rides out an unreachable database before it is given up. */
  dbOutageBoundMs: number;
  /** What each model's tokens cost: a metered call is priced as it is recorded. */
  prices: PriceTable;
  /** Whether a run's metered calls may go upstream: made once per run, asked per call. */
  admit: Admission;
  /** The egress lists of a run (its key's, its own), as stored now. */
  egressOf(runId: string): Promise<EgressLists>;
}

const LOOPBACK = "127.0.0.1";

/** A started gateway thread: its calls, and where it listens. */
interface GatewayThread {
  worker: Worker;
  calls: Rpc<HostCalls, WorkerCalls>;
  address: GatewayAddress;
}

export class ModelGateway {
  private readonly apis: Map<string, ModelApi>;
  /** The gateway's thread, once started (again, after one died). */
  private thread: Promise<GatewayThread> | undefined;
  /** The thread started last. */
  private current: Worker | undefined;
  /** Its port, once it first listened: a thread started again listens on it too. */
  private port = 0;
  private closing = false;
  /** The directory of the runs' sockets (0700), the server's alone. */
  private socketDir: Promise<string> | undefined;
  private accesses = 0;
  /** Each open access, as its thread serves it, with its run's admission. */
  private readonly open_ = new Map<number, { run: ServedRun; admission: CallAdmission }>();
  /** The latest refusal of each live run that had a call refused. */
  private readonly refusals = new Map<string, CallRefusal>();
  /** Records of calls being written, with their runs. */
  private readonly writing = new Map<Promise<void>, string>();

  constructor(private readonly opts: ModelGatewayOptions) {
    this.apis = new Map(opts.apis.map((api) => [api.prefix, api]));
  }

  /** Whether it serves any API: without one, nothing is started. */
  get serving(): boolean {
    return this.apis.size > 0;
  }

  /** Listens (the first call only) on a free loopback port; resolves with its address. */
  async listen(): Promise<GatewayAddress> {
    this.thread ??= this.start();
    return (await this.thread).address;
  }

  /** The gateway's thread while it runs (a test ends it as a crash would). */
  async worker(): Promise<Worker | undefined> {
    return (await this.thread?.catch(() => undefined))?.worker;
  }

  /**
   * Access to the API served under `prefix` for the run `runId`'s CLI, until it is closed;
   * `maxBudgetUsd` is the run's own cap.
   */
  async open(prefix: string, runId: string, maxBudgetUsd: number | null): Promise<RunAccess> {
    if (!this.apis.has(prefix)) throw new Error(`the gateway serves no API under /${prefix}`);
    const { url } = await this.listen();
    this.socketDir ??= mkdtemp(path.join(tmpdir(), "agent-bridge-gateway-"));
    const access = ++this.accesses;
    const run: ServedRun = {
      access,
      runId,
      token: newRunToken(),
      // Short: a socket's path may have 107 bytes at most.
      socket: path.join(await this.socketDir, `run-${access}.sock`),
    };
    this.open_.set(access, { run, admission: this.opts.admit({ runId, maxBudgetUsd }) });
    try {
      await (await this.listening()).calls.call("open", run);
    } catch (err) {
      this.open_.delete(access);
      throw err;
    }
    return {
      baseUrl: `${url}/${prefix}`,
      token: run.token,
      socket: run.socket,
      close: () => {
        if (!this.open_.delete(access)) return;
        this.refusals.delete(runId);
        void this.thread?.then(({ calls }) => calls.tell("close", run)).catch(() => undefined);
      },
      recorded: () => this.recorded(runId),
      refusal: () => this.refusals.get(runId),
      metered: () => meteredUsage(this.opts.db, runId),
    };
  }

  /**
   * Resolves once the calls under way (of the run `runId`, or of all) are over, and the records of
   * all its calls so far are written, or given up.
   */
  async recorded(runId?: string): Promise<void> {
    // A thread that is gone has no call under way.
    await this.thread?.then(({ calls }) => calls.call("idle", runId)).catch(() => undefined);
    const writes = [...this.writing].filter(([, run]) => runId === undefined || run === runId);
    await Promise.all(writes.map(([write]) => write));
  }

  /** Stops listening and drops every connection, upstream ones too; waits for the records. */
  async close(): Promise<void> {
    this.closing = true;
    const thread = await this.thread?.catch(() => undefined);
    if (thread) {
      await thread.calls.call("shutdown", undefined).catch(() => undefined);
      await thread.worker.terminate();
    }
    if (this.socketDir) await rm(await this.socketDir, { recursive: true, force: true });
    await this.recorded();
  }

  /** The thread, started again if it died. */
  private listening(): Promise<GatewayThread> {
    this.thread ??= this.start();
    return this.thread;
  }

  /** Starts the gateway's thread, listening, serving the accesses open. */
  private async start(): Promise<GatewayThread> {
    const apis: ServedApi[] = [...this.apis.values()].map(({ prefix, upstream }) => ({
      prefix,
      upstream: { baseUrl: upstream.baseUrl, credential: upstream.credential },
    }));
    const worker = new Worker(workerEntry(), {
      workerData: { apis },
      // The proxy variables are read as each call goes (./upstream.ts), as the main thread sees them.
      env: SHARE_ENV,
    });
    // The public server keeps the process alive; the gateway alone must not.
    worker.unref();
    const calls = new Rpc<HostCalls, WorkerCalls>(worker, this.host());
    this.current = worker;
    worker.on("error", (err) =>
      this.opts.logger.error("the model gateway's thread failed", { error: errorText(err) }),
    );
    worker.once("exit", (code) => {
      calls.fail(new Error(`the model gateway's thread exited (code ${code})`));
      if (this.current !== worker || this.closing) return;
      this.thread = undefined;
      // One that served runs is started again for them; one that never listened is started again
      // when it is next asked for.
      if (this.port === 0) return;
      this.opts.logger.error("the model gateway's thread exited; starting it again", { code });
      this.listening().catch((err) =>
        this.opts.logger.error("could not start the model gateway's thread again", {
          error: errorText(err),
        }),
      );
    });
    const port = await calls.call("listen", this.port);
    this.port = port;
    await Promise.all([...this.open_.values()].map(({ run }) => calls.call("open", run)));
    return { worker, calls, address: { url: `http://${LOOPBACK}:${port}`, port } };
  }

  /** What the gateway's thread asks of this one. */
  private host(): HostCalls {
    const { logger, egressOf } = this.opts;
    return {
      admit: async ({ grant, model }) => {
        // Closed meanwhile: the close reached the gateway's thread first, which cut the call.
        const admission = this.open_.get(grant.access)?.admission;
        return admission ? (await admission())(model) : null;
      },
      refused: ({ grant, refusal }) => {
        if (this.open_.has(grant.access)) this.refusals.set(grant.runId, refusal);
      },
      record: (call) => this.record(call),
      egressOf,
      log: ({ level, msg, fields }) => logger[level](msg, fields as Record<string, unknown>),
    };
  }

  /**
   * Records the call, retrying through an outage (`recorded` waits for that); resolves once its
   * first try is over, or after RECORD_WAIT_MS, which is what the caller's answer waits for: an
   * outage or a stuck connection delays no answer by more. Never rejects (a failure is logged).
   */
  private record(metered: MeteredCall): Promise<void> {
    const { db, logger, dbOutageBoundMs, prices } = this.opts;
    const call = {
      id: randomUUID(),
      ...metered,
      costUsd: costOf(priceOf(prices, metered.model), metered),
    };
    const first = recordModelCall(db, call);
    const writing = first
      .catch(() => withDbRetries(() => recordModelCall(db, call), dbOutageBoundMs))
      .catch((err) =>
        logger.error("could not record a model call", {
          run_id: call.runId,
          model: call.model,
          error: errorText(err),
        }),
      );
    this.writing.set(writing, call.runId);
    void writing.finally(() => this.writing.delete(writing));
    return new Promise((resolve) => {
      const late = setTimeout(resolve, RECORD_WAIT_MS);
      late.unref();
      const over = () => {
        clearTimeout(late);
        resolve();
      };
      first.then(over, over);
    });
  }
}

/**
 * The worker's module: beside this one, JavaScript once bundled (test/support/build.ts); under tsx,
 * TypeScript, which Node 20 runs as a worker's entry only from a module that registers tsx first.
 */
function workerEntry(): URL {
  const ownExtension = path.extname(new URL(import.meta.url).pathname);
  const entry = new URL(`./worker${ownExtension}`, import.meta.url);
  if (ownExtension !== ".ts") return entry;
  const tsx = JSON.stringify(import.meta.resolve("tsx/esm/api"));
  const boot = `import { register } from ${tsx}; register(); await import(${JSON.stringify(entry.href)});`;
  return new URL(`data:text/javascript,${encodeURIComponent(boot)}`);
}
