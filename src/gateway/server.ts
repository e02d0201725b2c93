import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { errorText, type Logger } from "../log.js";
import { costOf, type PriceTable, priceOf } from "../prices.js";
import type { Database } from "../store/db.js";
import { type MeteredUsage, meteredUsage, recordModelCall } from "../store/model-calls.js";
import { withDbRetries } from "../store/retry.js";
import type { Admission, CallRefusal } from "./admission.js";
import type { ModelApi, Route } from "./api.js";
import { type EgressLists, EgressProxy, parseEgressRule } from "./egress.js";
import { answer, forward, type MeteredCall } from "./forward.js";
import { RunSockets } from "./run-sockets.js";
import { type RunGrant, RunTokens } from "./tokens.js";
import { UpstreamClient } from "./upstream.js";

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
/** How long a caller's idle connection is kept. */
const KEEP_ALIVE_MS = 10 * 60 * 1000;

export class ModelGateway {
  private readonly tokens = new RunTokens();
  private readonly client = new UpstreamClient();
  private readonly server: Server;
  private readonly sockets: RunSockets;
  private readonly egress: EgressProxy;
  private readonly apis: Map<string, ModelApi>;
  private address: Promise<GatewayAddress> | undefined;
  /** The latest refusal of each live run that had a call refused. */
  private readonly refusals = new Map<string, CallRefusal>();
  /** Records of calls being written, with their runs. */
  private readonly writing = new Map<Promise<void>, string>();
  /** Each run's calls under way: their answers (cut when the run's access closes), and their ends. */
  private readonly underWay = new Map<string, Map<ServerResponse, Promise<void>>>();

  constructor(private readonly opts: ModelGatewayOptions) {
    this.apis = new Map(opts.apis.map((api) => [api.prefix, api]));
    this.server = createServer((req, res) => void this.handle(req, res));
    // A CLI calls again after its tools have run, often minutes later, on the connection it kept:
    // closed after Node's default 5 s, it could be closed just as the CLI sends on it.
    this.server.keepAliveTimeout = KEEP_ALIVE_MS;
    this.egress = new EgressProxy({
      grantOf: (token) => this.tokens.find(token),
      rulesOf: async (runId) => {
        const lists = await opts.egressOf(runId);
        return {
          key: lists.key.map(parseEgressRule),
          run: lists.run?.map(parseEgressRule) ?? null,
        };
      },
      logger: opts.logger,
    });
    this.server.on("connect", (req: IncomingMessage, socket, head: Buffer) => {
      this.egress.tunnel(req, socket, head).catch((err) => {
        opts.logger.error("a tunnel through the egress proxy failed", { error: errorText(err) });
        socket.destroy();
      });
    });
    this.sockets = new RunSockets(this.server);
  }

  /** Listens (the first call only) on a free loopback port; resolves with its address. */
  listen(): Promise<GatewayAddress> {
    this.address ??= listening(this.server).then((port) => ({
      url: `http://${LOOPBACK}:${port}`,
      port,
    }));
    return this.address;
  }

  /**
   * Access to the API served under `prefix` for the run `runId`'s CLI, until it is closed;
   * `maxBudgetUsd` is the run's own cap.
   */
  async open(prefix: string, runId: string, maxBudgetUsd: number | null): Promise<RunAccess> {
    if (!this.apis.has(prefix)) throw new Error(`the gateway serves no API under /${prefix}`);
    const { url } = await this.listen();
    const socket = await this.sockets.listen();
    const admit = this.opts.admit({ runId, maxBudgetUsd });
    const { token, revoke } = this.tokens.issue({ runId, admit });
    return {
      baseUrl: `${url}/${prefix}`,
      token,
      socket: socket.path,
      close: () => {
        revoke();
        socket.close();
        this.refusals.delete(runId);
        // A call still under way is the CLI's no more: it is cut, and recorded as it went.
        for (const res of this.underWay.get(runId)?.keys() ?? []) res.destroy();
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
    const calls = runId === undefined ? [...this.underWay.values()] : [this.underWay.get(runId)];
    await Promise.all(calls.flatMap((run) => [...(run?.values() ?? [])]));
    const writes = [...this.writing].filter(([, run]) => runId === undefined || run === runId);
    await Promise.all(writes.map(([write]) => write));
  }

  /** Stops listening and drops every connection, upstream ones too; waits for the records. */
  async close(): Promise<void> {
    const closed = this.server.listening
      ? new Promise<void>((resolve) => this.server.close(() => resolve()))
      : Promise.resolve();
    await this.sockets.close();
    this.server.closeAllConnections();
    this.egress.close();
    await closed;
    this.client.close();
    await this.recorded();
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = req.url ?? "/";
    // An absolute URI: a request for the proxy, not for a model API.
    if (!url.startsWith("/")) {
      return this.egress.forward(req, res).catch((err) => {
        this.opts.logger.error("a request through the egress proxy failed", {
          error: errorText(err),
        });
        res.destroy();
      });
    }
    const [, prefix = "", ...rest] = url.split("/");
    const api = this.apis.get(prefix);
    if (!api) {
      res.writeHead(404, { "content-type": "text/plain" }).end("no model API here\n");
      return;
    }
    const path = `/${rest.join("/")}`;
    const method = req.method ?? "GET";
    const route = api.route(method, path);
    let grant: ReturnType<RunTokens["find"]>;
    if (!route?.open) {
      const token = api.tokenOf(req.headers);
      grant = token === undefined ? undefined : this.tokens.find(token);
      if (!grant) {
        return this.refuse(
          req,
          res,
          api,
          401,
          "invalid run token: good only for its own run, while it runs",
        );
      }
      if (!route) {
        return this.refuse(
          req,
          res,
          api,
          404,
          `the gateway does not forward ${method} ${path.split("?")[0]}`,
        );
      }
    }
    const going = this.pass(req, res, api, route, path, grant);
    if (grant) this.track(grant.runId, res, going);
    await going;
  }

  /** A run's call under way until `going` settles. */
  private track(runId: string, res: ServerResponse, going: Promise<void>): void {
    const calls = this.underWay.get(runId) ?? new Map<ServerResponse, Promise<void>>();
    this.underWay.set(runId, calls);
    calls.set(res, going);
    void going.finally(() => {
      calls.delete(res);
      if (calls.size === 0 && this.underWay.get(runId) === calls) this.underWay.delete(runId);
    });
  }

  /** Forwards the call (./forward.ts); never rejects. */
  private async pass(
    req: IncomingMessage,
    res: ServerResponse,
    api: ModelApi,
    route: Route,
    path: string,
    grant: RunGrant | undefined,
  ): Promise<void> {
    try {
      await forward(
        req,
        res,
        {
          api,
          route,
          path,
          grant,
          refused: (refusal) => {
            if (grant) this.refusals.set(grant.runId, refusal);
            this.opts.logger.info("refused a model call", { run_id: grant?.runId, ...refusal });
          },
          record: (call) => this.record(call),
        },
        this.client,
      );
    } catch (err) {
      // Not foreseen: the caller gets a bare close, as from an API that fell over.
      this.opts.logger.error("a call through the model gateway failed", {
        run_id: grant?.runId,
        error: errorText(err),
      });
      res.destroy();
    }
  }

  /** Answers with the API's own error; the request's body is read and dropped, not forwarded. */
  private refuse(
    req: IncomingMessage,
    res: ServerResponse,
    api: ModelApi,
    status: number,
    message: string,
  ): void {
    req.resume();
    answer(res, api, status, message);
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

/** Starts `server` listening on a free loopback port; resolves with the port. */
function listening(server: Server): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, LOOPBACK, () => {
      server.off("error", reject);
      // The public server keeps the process alive; the gateway alone must not.
      server.unref();
      resolve((server.address() as AddressInfo).port);
    });
  });
}
