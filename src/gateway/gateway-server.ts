import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { errorText, type Logger } from "../log.js";
import type { CallRefusal } from "./admission.js";
import type { ModelApi, Route } from "./api.js";
import { type EgressLists, EgressProxy, parseEgressRule } from "./egress.js";
import { answer, forward, type MeteredCall } from "./forward.js";
import { type RunSocket, RunSockets } from "./run-sockets.js";
import { type RunGrant, RunTokens } from "./tokens.js";
import { UpstreamClient } from "./upstream.js";

// The gateway's HTTP side, in a thread of its own (./worker.ts): its port and the runs' sockets,
// their tokens, the calls forwarded upstream and the egress proxy. What rests on the database (a
// call's admission, its record, a run's egress lists) it asks of its host, the server's main
// thread (./server.ts), which holds the database.

/** What the gateway asks of the thread that holds the database. */
export interface GatewayHost {
  /** Whether a metered call of the access's run may go, given its model; null: it may. */
  admit(grant: RunGrant, model: string | null): Promise<CallRefusal | null>;
  /** Told of a call refused. */
  refused(grant: RunGrant, refusal: CallRefusal): void;
  /** Records a metered call; resolves once the caller's answer may end (never rejects). */
  record(call: MeteredCall): Promise<void>;
  /** The egress lists of a run (its key's, its own), as stored now. */
  egressOf(runId: string): Promise<EgressLists>;
  logger: Logger;
}

/** A run's access as the gateway serves it: its token, good until closed, and its socket. */
export interface ServedRun extends RunGrant {
  token: string;
  socket: string;
}

/** What the gateway's thread asks of the main thread, by message (./rpc.ts). */
export type HostCalls = {
  admit(ask: { grant: RunGrant; model: string | null }): Promise<CallRefusal | null>;
  refused(told: { grant: RunGrant; refusal: CallRefusal }): void;
  record(call: MeteredCall): Promise<void>;
  egressOf(runId: string): Promise<EgressLists>;
  log(line: { level: "debug" | "info" | "warn" | "error"; msg: string; fields: object }): void;
};

/** What the main thread asks of the gateway's thread. */
export type WorkerCalls = {
  listen(port: number): Promise<number>;
  open(run: ServedRun): Promise<void>;
  close(run: ServedRun): void;
  idle(runId: string | undefined): Promise<void>;
  shutdown(): Promise<void>;
};

const LOOPBACK = "127.0.0.1";
/** How long a caller's idle connection is kept. */
const KEEP_ALIVE_MS = 10 * 60 * 1000;

export class GatewayServer {
  private readonly tokens = new RunTokens();
  private readonly client = new UpstreamClient();
  private readonly server: Server;
  private readonly sockets: RunSockets;
  private readonly egress: EgressProxy;
  private readonly apis: Map<string, ModelApi>;
  /** Each open access's socket. */
  private readonly runSockets = new Map<number, RunSocket>();
  /** Each run's calls under way: their answers (cut when the run's access closes), and their ends. */
  private readonly underWay = new Map<string, Map<ServerResponse, Promise<void>>>();

  constructor(
    apis: ModelApi[],
    private readonly host: GatewayHost,
  ) {
    this.apis = new Map(apis.map((api) => [api.prefix, api]));
    this.server = createServer((req, res) => void this.handle(req, res));
    // A CLI calls again after its tools have run, often minutes later, on the connection it kept:
    // closed after Node's default 5 s, it could be closed just as the CLI sends on it.
    this.server.keepAliveTimeout = KEEP_ALIVE_MS;
    this.egress = new EgressProxy({
      grantOf: (token) => this.tokens.find(token),
      rulesOf: async (runId) => {
        const lists = await host.egressOf(runId);
        return {
          key: lists.key.map(parseEgressRule),
          run: lists.run?.map(parseEgressRule) ?? null,
        };
      },
      logger: host.logger,
    });
    this.server.on("connect", (req: IncomingMessage, socket, head: Buffer) => {
      this.egress.tunnel(req, socket, head).catch((err) => {
        host.logger.error("a tunnel through the egress proxy failed", { error: errorText(err) });
        socket.destroy();
      });
    });
    this.sockets = new RunSockets(this.server);
  }

  /** Listens on `port` of the loopback address (0: a free one); resolves with the port. */
  listen(port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.once("error", reject);
      this.server.listen(port, LOOPBACK, () => {
        this.server.off("error", reject);
        resolve((this.server.address() as AddressInfo).port);
      });
    });
  }

  /** Serves the run: its token is good, its socket listens, until `close`. */
  async open(run: ServedRun): Promise<void> {
    this.tokens.add(run.token, { access: run.access, runId: run.runId });
    this.runSockets.set(run.access, await this.sockets.listen(run.socket));
  }

  /** The run's token is worth nothing from now on, its socket is gone, its calls are cut. */
  close(run: ServedRun): void {
    this.tokens.revoke(run.token);
    this.runSockets.get(run.access)?.close();
    this.runSockets.delete(run.access);
    // A call still under way is the CLI's no more: it is cut, and recorded as it went.
    for (const res of this.underWay.get(run.runId)?.keys() ?? []) res.destroy();
  }

  /** Resolves once the calls under way (of the run `runId`, or of all) are over. */
  async idle(runId?: string): Promise<void> {
    const calls = runId === undefined ? [...this.underWay.values()] : [this.underWay.get(runId)];
    await Promise.all(calls.flatMap((run) => [...(run?.values() ?? [])]));
  }

  /** Stops listening and drops every connection, upstream ones too; waits for the calls' ends. */
  async shutdown(): Promise<void> {
    const closed = this.server.listening
      ? new Promise<void>((resolve) => this.server.close(() => resolve()))
      : Promise.resolve();
    this.sockets.close();
    this.server.closeAllConnections();
    this.egress.close();
    await closed;
    this.client.close();
    await this.idle();
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = req.url ?? "/";
    // An absolute URI: a request for the proxy, not for a model API.
    if (!url.startsWith("/")) {
      return this.egress.forward(req, res).catch((err) => {
        this.host.logger.error("a request through the egress proxy failed", {
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
    let grant: RunGrant | undefined;
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
          admit: (grant, model) => this.host.admit(grant, model),
          refused: (refusal) => {
            if (grant) this.host.refused(grant, refusal);
            this.host.logger.info("refused a model call", { run_id: grant?.runId, ...refusal });
          },
          record: (call) => this.host.record(call),
        },
        this.client,
      );
    } catch (err) {
      // Not foreseen (the host's admission failed, say): the caller gets a bare close, as from an
      // API that fell over.
      this.host.logger.error("a call through the model gateway failed", {
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
}
