import { once } from "node:events";
import { createServer as createHttpServer, request } from "node:http";
import { type AddressInfo, connect, createServer, type Server, type Socket } from "node:net";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueKey } from "../../src/auth/keys.js";
import { egressListsOfRun } from "../../src/auth/policy.js";
import { anthropicApi } from "../../src/gateway/anthropic.js";
import { matchingRule, parseEgressRule } from "../../src/gateway/egress.js";
import { MAX_RUN_CONNECTIONS } from "../../src/gateway/run-sockets.js";
import type { GatewayAddress, ModelGateway } from "../../src/gateway/server.js";
import { updateKeyPolicy } from "../../src/store/keys.js";
import { runs } from "../../src/store/schema.js";
import { BACKENDS, insertSessionRun, openTestDatabase, type TestDatabase } from "../support/db.js";
import { testGateway } from "../support/gateway.js";

// The gateway as a sandboxed run's only way out (src/gateway/egress.ts): an HTTP proxy whose
// password is the run's token, letting through what the egress list of the run's key allows, as
// stored at the moment of the connection. Driven here as curl or git would drive it, without a
// sandbox; test/process/sandbox.real.test.ts drives it from inside one, with the real CLI.

describe("an egress entry", () => {
  it("reads host, *.host, addresses and ports, and refuses what is none of them", () => {
    expect(parseEgressRule("GitHub.com")).toEqual({
      host: "github.com",
      subdomains: false,
      port: null,
    });
    expect(parseEgressRule("*.npmjs.org:443")).toEqual({
      host: "npmjs.org",
      subdomains: true,
      port: 443,
    });
    expect(parseEgressRule("[::1]:8080")).toEqual({ host: "::1", subdomains: false, port: 8080 });
    expect(parseEgressRule("10.0.0.5")).toMatchObject({ host: "10.0.0.5", port: null });
    expect(parseEgressRule("*")).toMatchObject({ host: "*", port: null });
    for (const bad of [
      "",
      "a b",
      "-x.com",
      "x.com:0",
      "x.com:70000",
      "[zz]",
      "http://x.com",
      "*x.com",
      "a\u0000b",
    ]) {
      expect(() => parseEgressRule(bad), bad).toThrow(/is not an egress entry/);
    }
  });

  it("matches a host and port: no port means 80 and 443; *.host the names under it, not it", () => {
    const rules = ["github.com", "*.npmjs.org", "127.0.0.1:5000"].map(parseEgressRule);
    expect(matchingRule(rules, "GITHUB.COM.", 443)).toBeDefined();
    expect(matchingRule(rules, "github.com", 22)).toBeUndefined();
    expect(matchingRule(rules, "registry.npmjs.org", 80)).toBeDefined();
    expect(matchingRule(rules, "npmjs.org", 443)).toBeUndefined();
    expect(matchingRule(rules, "evilnpmjs.org", 443)).toBeUndefined();
    expect(matchingRule(rules, "127.0.0.1", 5000)).toBeDefined();
    expect(matchingRule(rules, "127.0.0.1", 5001)).toBeUndefined();
    expect(matchingRule(["*"].map(parseEgressRule), "anything.example", 443)).toBeDefined();
  });
});

/** A CONNECT through the proxy: its status, and the tunnel when it opened. */
function connectThrough(
  gateway: GatewayAddress,
  target: string,
  token?: string,
): Promise<{ status: number; body: string; socket: Socket }> {
  return new Promise((resolve, reject) => {
    const req = request({
      host: "127.0.0.1",
      port: gateway.port,
      method: "CONNECT",
      path: target,
      headers: token
        ? { "proxy-authorization": `Basic ${Buffer.from(`run:${token}`).toString("base64")}` }
        : {},
    });
    req.on("connect", (res, socket, head: Buffer) => {
      let body = head.toString("utf8");
      if (res.statusCode !== 200) {
        socket.setEncoding("utf8");
        socket.on("data", (chunk: string) => {
          body += chunk;
        });
        socket.on("end", () => resolve({ status: res.statusCode ?? 0, body, socket }));
      } else resolve({ status: 200, body, socket });
    });
    req.on("error", reject);
    req.end();
  });
}

/** Writes through an open tunnel and reads the echo back. */
function echoed(socket: Socket, text: string): Promise<string> {
  return new Promise((resolve) => {
    socket.once("data", (chunk) => resolve(chunk.toString()));
    socket.write(text);
  });
}

describe.each(BACKENDS)("the egress proxy on %s", (backend) => {
  let database: TestDatabase;
  let gateway: ModelGateway;
  let address: GatewayAddress;
  let echo: Server;
  let echoPort: number;
  let web: ReturnType<typeof createHttpServer>;
  let webPort: number;

  beforeAll(async () => {
    database = await openTestDatabase(backend);
    gateway = testGateway(
      database.db,
      // An API to open runs' tokens with; nothing here calls it.
      [anthropicApi({ baseUrl: "http://127.0.0.1:9", credential: {} })],
      { egressOf: (runId) => egressListsOfRun(database.db, runId) },
    );
    address = await gateway.listen();
    echo = createServer((socket) => socket.pipe(socket));
    await new Promise<void>((resolve) => echo.listen(0, "127.0.0.1", resolve));
    echoPort = (echo.address() as AddressInfo).port;
    web = createHttpServer((req, res) => res.end(`plain ${req.method} ${req.url}`));
    await new Promise<void>((resolve) => web.listen(0, "127.0.0.1", resolve));
    webPort = (web.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await gateway.close();
    echo.close();
    web.close();
    await database.destroy();
  });

  /** A run of a key with this egress list, and a live token of the run's. */
  const runWithEgress = async (egress: string[]) => {
    const { row: key } = await issueKey(database.db, { name: "tenant", admin: false, egress });
    const run = await insertSessionRun(database.db, "hi", key.id);
    return { key, run, ...(await gateway.open("anthropic", run.id, null)) };
  };

  it("asks for the run's token (407), and refuses what the key's list does not name (403, nothing connected)", async () => {
    let connected = 0;
    const count = () => connected++;
    echo.on("connection", count);
    try {
      const { token } = await runWithEgress(["github.com"]);
      const target = `127.0.0.1:${echoPort}`;
      expect(await connectThrough(address, target)).toMatchObject({ status: 407 });
      expect(await connectThrough(address, target, "abrun_made-up")).toMatchObject({
        status: 407,
      });
      expect(await connectThrough(address, target, token)).toMatchObject({
        status: 403,
        body: `${target} is not in the egress list of the run's API key\n`,
      });
      expect(connected).toBe(0);
    } finally {
      echo.off("connection", count);
    }
  });

  it("opens a tunnel to an address the list names, and holds a narrowed list at the next connection", async () => {
    const { key, token } = await runWithEgress([`127.0.0.1:${echoPort}`]);
    const open = await connectThrough(address, `127.0.0.1:${echoPort}`, token);
    expect(open.status).toBe(200);
    expect(await echoed(open.socket, "through")).toBe("through");
    open.socket.destroy();
    await updateKeyPolicy(database.db, key.id, { egress: [] });
    expect(await connectThrough(address, `127.0.0.1:${echoPort}`, token)).toMatchObject({
      status: 403,
    });
  });

  it("holds a run to its own list too (a fork's pull request): only what both lists allow, an address only as written in both", async () => {
    const target = `127.0.0.1:${echoPort}`;
    const { run, token } = await runWithEgress([target]);
    await database.db.update(runs).set({ egress: [] }).where(eq(runs.id, run.id));
    expect(await connectThrough(address, target, token)).toMatchObject({
      status: 403,
      body: `${target} is not in the run's own egress list (a fork's pull request)\n`,
    });
    await database.db
      .update(runs)
      .set({ egress: [`*:${echoPort}`] })
      .where(eq(runs.id, run.id));
    expect(await connectThrough(address, target, token)).toMatchObject({
      status: 403,
      body: expect.stringContaining("is loopback: only an address written in the egress list"),
    });
    await database.db
      .update(runs)
      .set({ egress: [target] })
      .where(eq(runs.id, run.id));
    const open = await connectThrough(address, target, token);
    expect(open.status).toBe(200);
    open.socket.destroy();
  });

  it("reaches no loopback or private address by a name or by `*`, only by an address written in the list", async () => {
    const { token } = await runWithEgress(["*", `*:${echoPort}`, `localhost:${echoPort}`]);
    expect(await connectThrough(address, `127.0.0.1:${echoPort}`, token)).toMatchObject({
      status: 403,
      body: expect.stringContaining("is loopback: only an address written in the egress list"),
    });
    expect(await connectThrough(address, `localhost:${echoPort}`, token)).toMatchObject({
      status: 403,
      body: expect.stringContaining("resolves to an address that is loopback"),
    });
    expect(await connectThrough(address, "10.1.2.3:443", token)).toMatchObject({
      status: 403,
      body: expect.stringContaining("private"),
    });
  });

  it("forwards a plain-HTTP request by absolute URL when allowed, without the proxy's credential", async () => {
    const { token } = await runWithEgress([`127.0.0.1:${webPort}`]);
    const auth = `Basic ${Buffer.from(`run:${token}`).toString("base64")}`;
    const get = (url: string, headers: Record<string, string>) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = request(
          { host: "127.0.0.1", port: address.port, path: url, headers },
          (res) => {
            let body = "";
            res.setEncoding("utf8");
            res.on("data", (chunk: string) => {
              body += chunk;
            });
            res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
          },
        );
        req.on("error", reject);
        req.end();
      });
    expect(
      await get(`http://127.0.0.1:${webPort}/page?q=1`, { "proxy-authorization": auth }),
    ).toEqual({ status: 200, body: "plain GET /page?q=1" });
    expect(
      await get(`http://127.0.0.1:${webPort + 1}/`, { "proxy-authorization": auth }),
    ).toMatchObject({ status: 403 });
    expect(await get(`http://127.0.0.1:${webPort}/`, {})).toMatchObject({ status: 407 });
  });

  it("is not kept from closing by a refused CONNECT whose client never closes its end", async () => {
    // A gateway of its own, to close: its close waits for every socket it holds.
    const own = testGateway(database.db, []);
    const client = connect({
      host: "127.0.0.1",
      port: (await own.listen()).port,
      allowHalfOpen: true,
    });
    let answer = "";
    client.setEncoding("utf8");
    client.on("data", (chunk: string) => {
      answer += chunk;
    });
    const ended = once(client, "end");
    client.write(`CONNECT 127.0.0.1:${echoPort} HTTP/1.1\r\nHost: x\r\n\r\n`);
    await ended;
    expect(answer).toMatch(/^HTTP\/1\.1 407 /);
    // The client's end still open, the gateway holds nothing of it: its close is not kept waiting.
    await own.close();
    client.destroy();
  });

  it("caps each run's connections on its own socket, and another run's socket still serves", async () => {
    const [a, b] = [await runWithEgress([]), await runWithEgress([])];
    const open = (socket: string) =>
      new Promise<Socket>((resolve, reject) => {
        const s = connect(socket, () => resolve(s));
        s.once("error", reject);
      });
    const held: Socket[] = [];
    try {
      for (let i = 0; i < MAX_RUN_CONNECTIONS; i++) held.push(await open(a.socket));
      // One more is accepted by the kernel, then closed by the gateway unserved.
      const extra = await open(a.socket);
      await once(extra, "close");
      // The other run's socket serves as ever: a CONNECT through it gets its answer.
      const other = await open(b.socket);
      const answered = once(other, "data");
      other.write(`CONNECT 127.0.0.1:${echoPort} HTTP/1.1\r\nHost: x\r\n\r\n`);
      expect(String((await answered)[0])).toMatch(/^HTTP\/1\.1 407 /);
      other.destroy();
    } finally {
      for (const s of held) s.destroy();
      a.close();
      b.close();
    }
  });

  it("takes a token for nothing once its run is over", async () => {
    const { token, close } = await runWithEgress([`127.0.0.1:${echoPort}`]);
    close();
    expect(await connectThrough(address, `127.0.0.1:${echoPort}`, token)).toMatchObject({
      status: 407,
    });
  });
});
