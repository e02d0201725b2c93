import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";

// A loopback stand-in for the REST APIs of GitHub and GitLab that a hook replies through and asks
// who may trigger it. It keeps what was written: a POST creates a resource (an id, the body, an
// `html_url`/`web_url`) that a later PATCH or PUT of `<collection>/<id>` updates and a GET reads;
// a GET of anything else answers what the test `set` for that path, or 404. A request without the
// expected token is answered 401. A test scripts failures with `failNext` (a 502, a rate limit with
// its headers) and reads every request in `requests`; `waitFor` resolves once a request matching
// it has been answered, so tests wait on the API's traffic, never on time.

export interface ForgeRequest {
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
  /** The status the mock answered. */
  status: number;
}

export interface ScriptedFailure {
  method?: string;
  /** Matches a request whose path passes this test. */
  path: RegExp;
  status: number;
  headers?: Record<string, string>;
  body?: unknown;
}

export interface MockForge {
  url: string;
  requests: ForgeRequest[];
  /** The resource at this path (as last written), or what `set` gave. */
  get(path: string): unknown;
  set(path: string, json: unknown): void;
  failNext(failure: ScriptedFailure): void;
  waitFor(test: (r: ForgeRequest) => boolean): Promise<ForgeRequest>;
  close(): Promise<void>;
}

export interface MockForgeOptions {
  forge: "github" | "gitlab";
  token: string;
}

function authorized(req: IncomingMessage, opts: MockForgeOptions): boolean {
  if (opts.forge === "gitlab") return req.headers["private-token"] === opts.token;
  return req.headers.authorization === `Bearer ${opts.token}`;
}

export async function startMockForge(opts: MockForgeOptions): Promise<MockForge> {
  const resources = new Map<string, unknown>();
  const failures: ScriptedFailure[] = [];
  const requests: ForgeRequest[] = [];
  const waiters: { test: (r: ForgeRequest) => boolean; resolve: (r: ForgeRequest) => void }[] = [];
  /** GitHub updates an issue comment at `/repos/o/r/issues/comments/<id>`, not where it was made. */
  const aliases = new Map<string, string>();
  const canonical = (path: string) => aliases.get(path) ?? path;
  let nextId = 1000;
  let url = "";

  const answer = (
    req: IncomingMessage,
    path: string,
    body: unknown,
  ): { status: number; json: unknown; headers?: Record<string, string> } => {
    const method = req.method ?? "GET";
    if (!authorized(req, opts)) return { status: 401, json: { message: "Bad credentials" } };
    const failure = failures.findIndex(
      (f) => (!f.method || f.method === method) && f.path.test(path),
    );
    if (failure !== -1) {
      const [f] = failures.splice(failure, 1);
      if (f)
        return { status: f.status, json: f.body ?? { message: "scripted" }, headers: f.headers };
    }
    if (method === "POST") {
      const id = nextId++;
      const webUrl = `${url}/web${path}/${id}`;
      const created = {
        ...(body !== null && typeof body === "object" ? body : {}),
        id,
        html_url: webUrl,
        web_url: webUrl,
      };
      resources.set(`${path}/${id}`, created);
      const comments = /^(\/repos\/[^/]+\/[^/]+\/issues)\/\d+\/comments$/.exec(path);
      if (opts.forge === "github" && comments) {
        aliases.set(`${comments[1]}/comments/${id}`, `${path}/${id}`);
      }
      return { status: 201, json: created };
    }
    if (method === "PATCH" || method === "PUT") {
      const existing = resources.get(canonical(path));
      if (existing === undefined) return { status: 404, json: { message: "Not Found" } };
      const updated = { ...(existing as object), ...(body as object) };
      resources.set(canonical(path), updated);
      return { status: 200, json: updated };
    }
    const found = resources.get(canonical(path));
    return found === undefined
      ? { status: 404, json: { message: "Not Found" } }
      : { status: 200, json: found };
  };

  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString("utf8");
    let body: unknown;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      body = text;
    }
    const path = new URL(req.url ?? "/", "http://mock").pathname;
    const { status, json, headers } = answer(req, path, body);
    res.writeHead(status, { "Content-Type": "application/json", ...headers });
    res.end(JSON.stringify(json));
    const recorded = { method: req.method ?? "GET", path, headers: req.headers, body, status };
    requests.push(recorded);
    for (const waiter of waiters.splice(0)) {
      if (waiter.test(recorded)) waiter.resolve(recorded);
      else waiters.push(waiter);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    url,
    requests,
    get: (path) => resources.get(canonical(path)),
    set: (path, json) => resources.set(path, json),
    failNext: (failure) => failures.push(failure),
    waitFor: (test) => {
      const seen = requests.find(test);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve) => waiters.push({ test, resolve }));
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
