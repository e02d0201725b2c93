import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generateKey } from "../../src/auth/keys.js";
import { serverDatabases } from "../support/db.js";
import { type ServerProcess, startServer } from "../support/server.js";

// A request without a Host header, as a load balancer's health check sends one (HAProxy's
// `option httpchk GET /healthz` speaks HTTP/1.0, which needs none), to the service as a real
// process: the adapter in front of the app, not the app alone, is what refused it.

/** Sends `head` (request line and headers) on a connection of its own; the answer once it closes. */
async function raw(url: string, head: string[]) {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  const chunks: Buffer[] = [];
  socket.on("data", (d: Buffer) => chunks.push(d));
  socket.end(`${head.join("\r\n")}\r\n\r\n`);
  await new Promise((resolve, reject) => socket.on("close", resolve).on("error", reject));
  const text = Buffer.concat(chunks).toString("utf8");
  const [top = "", body = ""] = text.split("\r\n\r\n", 2);
  const [statusLine = "", ...headers] = top.split("\r\n");
  const header = (name: string) =>
    headers
      .find((h) => h.toLowerCase().startsWith(`${name}:`))
      ?.slice(name.length + 1)
      .trim();
  return { status: Number(statusLine.split(" ")[1]), header, body };
}

describe("requests without a Host header", () => {
  const databases = serverDatabases();
  const key = generateKey();
  let server: ServerProcess;
  beforeAll(async () => {
    server = await startServer({
      ...(await databases.embedded()),
      AGENT_BRIDGE_AUTH: "keys",
      AGENT_BRIDGE_API_KEY: key,
    });
  });
  afterAll(async () => {
    await server?.stop();
    await databases.cleanup();
  });

  it("HTTP/1.0 without Host: /healthz and /readyz answer, and the API asks for a key as it does of anyone", async () => {
    const health = await raw(server.url, ["GET /healthz HTTP/1.0"]);
    expect(health.status).toBe(200);
    expect(JSON.parse(health.body)).toEqual({ status: "ok" });
    const ready = await raw(server.url, ["GET /readyz HTTP/1.0"]);
    expect(ready.status).toBe(200);
    expect(JSON.parse(ready.body)).toMatchObject({ status: "ok", database: "pglite" });

    const keyless = await raw(server.url, ["GET /v1/sessions HTTP/1.0"]);
    expect(keyless.status).toBe(401);
    expect(keyless.header("content-type")).toMatch(/^application\/problem\+json/);
    expect(JSON.parse(keyless.body)).toMatchObject({ code: "unauthorized" });
    const keyed = await raw(server.url, [
      "GET /v1/sessions HTTP/1.0",
      `Authorization: Bearer ${key}`,
    ]);
    expect(keyed.status).toBe(200);
    expect(JSON.parse(keyed.body)).toEqual({ data: [], next_cursor: null });
  });

  it("HTTP/1.1 without Host is a 400, as RFC 9112 requires of a server", async () => {
    const res = await raw(server.url, ["GET /healthz HTTP/1.1", "Connection: close"]);
    expect(res.status).toBe(400);
  });
});
