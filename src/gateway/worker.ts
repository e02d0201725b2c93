import { parentPort, workerData } from "node:worker_threads";
import type { Logger } from "../log.js";
import { anthropicApi } from "./anthropic.js";
import type { ModelApi } from "./api.js";
import { GatewayServer, type HostCalls, type WorkerCalls } from "./gateway-server.js";
import { openaiApi } from "./openai.js";
import { Rpc } from "./rpc.js";
import type { Upstream } from "./upstream.js";

// The gateway's thread, started by ./server.ts: it serves the model APIs to the runs' CLIs, so that
// a call waits for nothing the server's main thread is busy with (the embedded database's queries
// run there, synchronously) but its admission and its record, which it asks of that thread.

/** The APIs the gateway can serve, each known by its prefix. */
const API_MAKERS: Record<string, (upstream: Upstream) => ModelApi> = {
  anthropic: anthropicApi,
  openai: openaiApi,
};

/** An API to serve, as the main thread names it. */
export interface ServedApi {
  prefix: string;
  upstream: Upstream;
}

if (parentPort) {
  const { apis } = workerData as { apis: ServedApi[] };
  /** This thread's lines, written by the main thread's logger. */
  const logger = (fields: Record<string, unknown>): Logger => {
    const line =
      (level: "debug" | "info" | "warn" | "error") =>
      (msg: string, more: Record<string, unknown> = {}) =>
        host.tell("log", { level, msg, fields: { ...fields, ...more } });
    return {
      debug: line("debug"),
      info: line("info"),
      warn: line("warn"),
      error: line("error"),
      child: (more) => logger({ ...fields, ...more }),
    };
  };
  const server: GatewayServer = new GatewayServer(
    apis.map(({ prefix, upstream }) => {
      const make = API_MAKERS[prefix];
      if (!make) throw new Error(`the gateway knows no API under /${prefix}`);
      return make(upstream);
    }),
    {
      admit: (grant, model) => host.call("admit", { grant, model }),
      refused: (grant, refusal) => host.tell("refused", { grant, refusal }),
      // The main thread's record never fails; gone, it recorded nothing, and the answer ends.
      record: (call) => host.call("record", call).catch(() => undefined),
      egressOf: (runId) => host.call("egressOf", runId),
      logger: logger({}),
    },
  );
  const host: Rpc<WorkerCalls, HostCalls> = new Rpc(parentPort, {
    listen: (port) => server.listen(port),
    open: (run) => server.open(run),
    close: (run) => server.close(run),
    idle: (runId) => server.idle(runId),
    shutdown: () => server.shutdown(),
  });
}
