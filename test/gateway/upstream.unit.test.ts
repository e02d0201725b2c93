import { once } from "node:events";
import { createServer as createHttpServer, type IncomingMessage } from "node:http";
import { createServer, type Socket } from "node:net";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { UpstreamClient } from "../../src/gateway/upstream.js";

// The gateway's connections to its upstream: kept alive (a connectivity check's `HEAD` takes none
// of them), and a call that meets one the upstream closed as it was taken goes again on a new one
// instead of failing its run.

const ANSWER = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: keep-alive\r\n\r\nok";

/** An upstream that answers the first call of each connection and resets at the second. */
async function upstreamClosingIdle() {
  const connections: Socket[] = [];
  const server = createServer((socket) => {
    connections.push(socket);
    let calls = 0;
    socket.on("data", () => {
      calls += 1;
      if (calls === 1) socket.write(ANSWER);
      else socket.resetAndDestroy();
    });
    socket.on("error", () => {});
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as { port: number };
  return { baseUrl: `http://127.0.0.1:${port}`, connections, close: () => server.close() };
}

async function read(res: IncomingMessage): Promise<string> {
  let text = "";
  for await (const chunk of res) text += chunk;
  return text;
}

describe("the gateway's upstream client", () => {
  const client = new UpstreamClient();
  let closeUpstream = () => {};
  afterEach(() => closeUpstream());
  afterAll(() => client.close());

  it("sends a call again on a new connection when the kept-alive one is reset before any answer", async () => {
    const upstream = await upstreamClosingIdle();
    closeUpstream = upstream.close;
    const call = { method: "POST", path: "/v1/messages", headers: {}, body: Buffer.from("{}") };
    const target = { baseUrl: upstream.baseUrl, credential: {} };
    const first = await client.send(target, call).response;
    expect(await read(first)).toBe("ok");
    // The second call takes the kept-alive connection, which the upstream resets.
    const second = await client.send(target, call).response;
    expect(second.statusCode).toBe(200);
    expect(await read(second)).toBe("ok");
    expect(upstream.connections).toHaveLength(2);
  });

  it("sends a HEAD on a connection of its own: the call after it goes on the one the call before it kept", async () => {
    // Answers a HEAD as the API's check does, without a Content-Length.
    const sockets: unknown[] = [];
    const server = createHttpServer((req, res) => {
      sockets.push(req.socket);
      req.resume();
      req.on("end", () => res.writeHead(200).end(req.method === "HEAD" ? undefined : "ok"));
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    closeUpstream = () => server.close();
    const { port } = server.address() as { port: number };
    const target = { baseUrl: `http://127.0.0.1:${port}`, credential: {} };
    const post = { method: "POST", path: "/v1/messages", headers: {}, body: Buffer.from("{}") };
    expect(await read(await client.send(target, post).response)).toBe("ok");
    const head = { method: "HEAD", path: "/api/hello", headers: {}, body: Buffer.alloc(0) };
    expect((await client.send(target, head).response).statusCode).toBe(200);
    expect(await read(await client.send(target, post).response)).toBe("ok");
    const [first, check, next] = sockets;
    expect(check).not.toBe(first);
    expect(next).toBe(first);
  });
});
