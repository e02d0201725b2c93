import { createHmac, randomBytes } from "node:crypto";
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo, Socket } from "node:net";

// Helpers of the hook tests: signing as each kind of sender does, a callback receiver on
// loopback, and polling.

export const newStandardSecret = () => `whsec_${randomBytes(24).toString("base64")}`;

export function githubHeaders(
  secret: string,
  body: string | Buffer,
  opts: { id?: string; event?: string } = {},
): Record<string, string> {
  return {
    "Content-Type": "application/json",
    "X-Hub-Signature-256": `sha256=${createHmac("sha256", secret).update(body).digest("hex")}`,
    "X-GitHub-Delivery": opts.id ?? crypto.randomUUID(),
    "X-GitHub-Event": opts.event ?? "pull_request",
  };
}

/** Signs as the Standard Webhooks spec says: HMAC-SHA256 of `id.timestamp.body`, key base64. */
export function standardSignature(secret: string, id: string, timestamp: number, body: string) {
  const key = Buffer.from(secret.slice("whsec_".length), "base64");
  return `v1,${createHmac("sha256", key).update(`${id}.${timestamp}.${body}`).digest("base64")}`;
}

export function standardHeaders(
  secret: string,
  body: string,
  opts: { id?: string; timestamp?: number } = {},
): Record<string, string> {
  const id = opts.id ?? `msg_${randomBytes(8).toString("hex")}`;
  const timestamp = opts.timestamp ?? Math.floor(Date.now() / 1000);
  return {
    "Content-Type": "application/json",
    "webhook-id": id,
    "webhook-timestamp": String(timestamp),
    "webhook-signature": standardSignature(secret, id, timestamp, body),
  };
}

export interface ReceivedCallback {
  at: number;
  headers: IncomingHttpHeaders;
  body: string;
}

export interface Receiver {
  url: string;
  received: ReceivedCallback[];
  /** How to answer the next request: a status, after an optional delay. */
  plan: (n: number) => { status: number; delayMs?: number };
  /**
   * Resolves once no connection is open: a request a killed server sent before it died has been
   * read and answered (to no one) by then.
   */
  idle(): Promise<void>;
  close(): Promise<void>;
}

/** A callback receiver on loopback that records every request and answers as `plan` says. */
export async function startReceiver(
  plan: Receiver["plan"] = () => ({ status: 200 }),
): Promise<Receiver> {
  const sockets = new Set<Socket>();
  const waiting: (() => void)[] = [];
  const receiver: Receiver = {
    url: "",
    received: [],
    plan,
    idle: () =>
      sockets.size === 0 ? Promise.resolve() : new Promise((resolve) => waiting.push(resolve)),
    close: async () => {},
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      receiver.received.push({
        at: Date.now(),
        headers: req.headers,
        body: Buffer.concat(chunks).toString("utf8"),
      });
      const { status, delayMs = 0 } = receiver.plan(receiver.received.length);
      setTimeout(() => {
        if (!res.destroyed) res.writeHead(status).end("ok");
      }, delayMs);
    });
  });
  // A socket closes after what it brought has been read.
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => {
      sockets.delete(socket);
      if (sockets.size === 0) for (const resolve of waiting.splice(0)) resolve();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/callback`;
  receiver.close = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  return receiver;
}

/** Polls `probe` until it returns something truthy. */
export async function until<T>(
  probe: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  timeoutMs = 20_000,
  what = "the condition",
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export async function createHook(
  base: string,
  body: Record<string, unknown>,
  headers: Record<string, string> = {},
) {
  const res = await fetch(`${base}/v1/hooks`, {
    method: "POST",
    headers: { "Content-Type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  if (res.status !== 201) throw new Error(`creating the hook: ${res.status} ${await res.text()}`);
  return res.json() as Promise<Record<string, unknown>>;
}

export const deliver = (
  base: string,
  name: string,
  body: string,
  headers: Record<string, string>,
) => fetch(`${base}/v1/hooks/${name}/deliveries`, { method: "POST", headers, body });

export interface RunJson {
  id: string;
  session_id: string;
  status: string;
  trigger: string;
  prompt: string;
  system_prompt: string | null;
  result: string | null;
  callback: {
    state: string;
    attempts: number;
    last_error: string | null;
    last_status: number | null;
    next_attempt_at: string | null;
  } | null;
  replies: {
    kind: string;
    state: string;
    url: string | null;
    attempts: number;
    last_status: number | null;
    last_error: string | null;
  }[];
}

export async function getRun(base: string, id: string): Promise<RunJson> {
  return (await fetch(`${base}/v1/runs/${id}`)).json() as Promise<RunJson>;
}

export const isFinished = (run: RunJson) => !["queued", "running"].includes(run.status);
