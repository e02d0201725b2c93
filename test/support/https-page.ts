import { readFile } from "node:fs/promises";
import { createServer } from "node:https";
import type { AddressInfo } from "node:net";
import { resolve } from "node:path";

// One page served over TLS on 127.0.0.1, for the real CLI's WebFetch to fetch: it upgrades
// http:// to https:// and will not fetch `localhost`. The CLI trusts the certificate when its
// env has NODE_EXTRA_CA_CERTS=`cert` (see test/fixtures/tls/README.md).

const TLS = resolve(import.meta.dirname, "../fixtures/tls");

export interface HttpsPage {
  url: string;
  /** The certificate to trust. */
  cert: string;
  /** Paths requested so far. */
  requests: string[];
  close(): Promise<void>;
}

export async function startHttpsPage(body: string): Promise<HttpsPage> {
  const requests: string[] = [];
  const server = createServer(
    {
      key: await readFile(`${TLS}/127.0.0.1.key.pem`),
      cert: await readFile(`${TLS}/127.0.0.1.cert.pem`),
    },
    (req, res) => {
      requests.push(req.url ?? "/");
      res.writeHead(200, { "content-type": "text/plain; charset=utf-8" });
      res.end(body);
    },
  );
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const { port } = server.address() as AddressInfo;
  return {
    url: `https://127.0.0.1:${port}/page`,
    cert: `${TLS}/127.0.0.1.cert.pem`,
    requests,
    close: () =>
      new Promise<void>((done) => {
        server.closeAllConnections();
        server.close(() => done());
      }),
  };
}
