import { request } from "node:http";
import type { ModelApi } from "../../src/gateway/api.js";
import { ModelGateway, type ModelGatewayOptions } from "../../src/gateway/server.js";
import { silentLogger } from "../../src/log.js";
import type { Database } from "../../src/store/db.js";

// The model gateway (src/gateway/) as its tests make and call it, without a CLI.

/**
 * A gateway serving `apis`, recording to `db`: no prices, every call admitted, no egress; `own`
 * says otherwise.
 */
export function testGateway(
  db: Database,
  apis: ModelApi[],
  own: Partial<ModelGatewayOptions> = {},
): ModelGateway {
  return new ModelGateway({
    apis,
    db,
    logger: silentLogger,
    dbOutageBoundMs: 5000,
    prices: {},
    admit: () => async () => () => null,
    egressOf: async () => ({ key: [], run: null }),
    ...own,
  });
}

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One request with exactly these headers (fetch would not send a Connection header). */
export function call(
  url: string,
  method: string,
  headers: Record<string, string>,
  body?: unknown,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, headers }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        text += chunk;
      });
      res.on("end", () =>
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }),
      );
    });
    req.on("error", reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}
