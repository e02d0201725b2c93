import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ApiProblem, createClient, type StreamedEvent } from "../../src/client/index.js";
import { BACKENDS } from "../support/db.js";
import { streamedReply } from "../support/fake-scenarios.js";
import { type LiveServer, liveServer } from "./live.js";

// The client against the real app over loopback HTTP, with the scripted fake CLI: sessions,
// streaming a message, reconnecting after a dropped connection, aborting, and problem errors.

const PARTS = ["Hel", "lo", ", wor", "ld", "!"];

async function collect(events: AsyncIterable<StreamedEvent>): Promise<StreamedEvent[]> {
  const all: StreamedEvent[] = [];
  for await (const event of events) all.push(event);
  return all;
}

/**
 * A fetch that cuts the first message stream after `events` events, in the middle of the next
 * frame, as a dropped connection would; it records every request.
 */
function droppingFetch(events: number) {
  const requests: Request[] = [];
  let dropped = false;
  const dropping = async (request: Request): Promise<Response> => {
    requests.push(request.clone());
    const response = await fetch(request);
    if (dropped || !request.url.endsWith("/messages") || !response.body) return response;
    dropped = true;
    return new Response(cutAfter(response.body, events), {
      status: response.status,
      headers: response.headers,
    });
  };
  return { fetch: dropping, requests };
}

function cutAfter(body: ReadableStream<Uint8Array>, events: number): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();
  let text = "";
  let sent = 0;
  return new ReadableStream({
    async pull(controller) {
      const { value, done } = await reader.read();
      if (done) return controller.close();
      text += decoder.decode(value, { stream: true });
      const end = endOfEvent(text, events);
      if (end === undefined) {
        controller.enqueue(encoder.encode(text.slice(sent)));
        sent = text.length;
        return;
      }
      // The n-th event whole, then half a line of the next: the parser must drop the half.
      controller.enqueue(encoder.encode(text.slice(sent, end + 8)));
      await reader.cancel();
      controller.error(new TypeError("terminated: connection reset"));
    },
  });
}

/** The offset just after the n-th event frame (keep-alive comments do not count). */
function endOfEvent(text: string, n: number): number | undefined {
  let seen = 0;
  let start = 0;
  for (;;) {
    const end = text.indexOf("\n\n", start);
    if (end < 0) return undefined;
    if (!text.startsWith(":", start)) seen += 1;
    if (seen === n) return end + 2;
    start = end + 2;
  }
}

describe.each(BACKENDS)("the client on %s", (backend) => {
  let live: LiveServer;

  beforeAll(async () => {
    live = await liveServer(backend, streamedReply(PARTS, { delayMs: 30 }));
  });
  afterAll(async () => {
    await live?.close();
  });

  it("creates, lists, reads and deletes sessions", async () => {
    const client = createClient({ baseUrl: live.url });
    const created = await client.createSession({ title: "from the client", effort: "high" });
    expect(created).toMatchObject({ title: "from the client", effort: "high" });
    expect(await client.getSession(created.id)).toEqual(created);

    const page = await client.listSessions({ limit: 100 });
    expect(page.data.map((s) => s.id)).toContain(created.id);

    await client.deleteSession(created.id);
    const gone = await client.getSession(created.id).catch((err: unknown) => err);
    expect(gone).toBeInstanceOf(ApiProblem);
    expect(gone).toMatchObject({ status: 404, code: "session_not_found" });
  });

  it("exposes the typed paths of openapi-fetch", async () => {
    const client = createClient({ baseUrl: live.url });
    const { data, response } = await client.POST("/v1/sessions", { body: { title: "raw" } });
    expect(response.status).toBe(201);
    expect(data?.title).toBe("raw");
  });

  it("streams a message: run_started, the text in order, one completion, then ends", async () => {
    const client = createClient({ baseUrl: live.url });
    const session = await client.createSession();
    const events = await collect(client.stream(session.id, "hi"));
    expect(events.map((e) => e.type)).toEqual([
      "run_started",
      ...PARTS.map(() => "text_delta"),
      "completion",
    ]);
    expect(events.map((e) => e.id)).toEqual(events.map((_, i) => i + 1));
    const text = events.map((e) => (e.type === "text_delta" ? e.text : "")).join("");
    expect(text).toBe("Hello, world!");
    const last = events.at(-1);
    expect(last?.type === "completion" && last.status).toBe("succeeded");

    const first = events[0];
    if (first?.type !== "run_started") throw new Error("expected run_started first");
    const run = await client.getRun(first.run_id);
    expect(run).toMatchObject({ status: "succeeded", result: "Hello, world!" });
    expect(run.completion?.status).toBe("succeeded");
  });

  it("reconnects after a dropped connection with Last-Event-ID: every event exactly once", async () => {
    const dropping = droppingFetch(2);
    const client = createClient({ baseUrl: live.url, fetch: dropping.fetch });
    const session = await client.createSession();
    const events = await collect(client.stream(session.id, "hi"));

    expect(events.map((e) => e.id)).toEqual(events.map((_, i) => i + 1));
    expect(events.map((e) => e.type)).toEqual([
      "run_started",
      ...PARTS.map(() => "text_delta"),
      "completion",
    ]);
    const resumed = dropping.requests.filter((r) => r.url.includes("/v1/runs/"));
    expect(resumed).toHaveLength(1);
    expect(resumed[0]?.url).toMatch(/\/v1\/runs\/[0-9a-f-]+\/events/);
    expect(resumed[0]?.headers.get("last-event-id")).toBe("2");
  });

  it("follows an existing run from an event id", async () => {
    const client = createClient({ baseUrl: live.url });
    const session = await client.createSession();
    const run = await client.sendAsync(session.id, "hi");
    const events = await collect(client.follow(run.id, { after: 3 }));
    expect(events[0]?.id).toBe(4);
    expect(events.at(-1)?.type).toBe("completion");
    expect(events.filter((e) => e.type === "completion")).toHaveLength(1);
  });

  it("stops reading when the signal aborts; the run goes on on the server", async () => {
    const client = createClient({ baseUrl: live.url });
    const session = await client.createSession();
    const controller = new AbortController();
    const seen: StreamedEvent[] = [];
    const outcome = await (async () => {
      for await (const event of client.stream(session.id, "hi", { signal: controller.signal })) {
        seen.push(event);
        if (event.type === "text_delta") controller.abort();
      }
    })().catch((err: unknown) => err);
    expect(outcome).toMatchObject({ name: "AbortError" });
    expect(seen.map((e) => e.type)).toEqual(["run_started", "text_delta"]);

    const first = seen[0];
    if (first?.type !== "run_started") throw new Error("expected run_started first");
    const rest = await collect(client.follow(first.run_id, { after: 2 }));
    expect(rest.at(-1)).toMatchObject({ type: "completion", status: "succeeded" });
  });

  it("waits for the finished run with send", async () => {
    const client = createClient({ baseUrl: live.url });
    const session = await client.createSession();
    const finished = await client.send(session.id, "hi");
    expect(finished.text).toBe("Hello, world!");
    expect(finished.run.status).toBe("succeeded");
    expect(finished.completion.status).toBe("succeeded");
  });

  it("streams a message in the full view, and retries its run: waiting, or queued at once", async () => {
    const client = createClient({ baseUrl: live.url });
    const session = await client.createSession();
    const events = await collect(client.stream(session.id, "hi", { events: "full" }));
    expect(events.map((e) => e.type)).toContain("session_status");
    // Numbered in the full view, as the stream was.
    expect(events.map((e) => e.id)).toEqual(events.map((_, i) => i + 1));
    const first = events[0]?.type === "run_started" ? events[0].run_id : "";

    const retried = await client.retry(first);
    expect(retried).toMatchObject({
      run: { trigger: "retry", prompt: "hi" },
      text: "Hello, world!",
    });
    const queued = await client.retryAsync(retried.run.id, { text: "once more" });
    expect(queued).toMatchObject({ status: "queued", prompt: "once more" });
    const stale = await client.retry(first).catch((err: unknown) => err);
    expect(stale).toBeInstanceOf(ApiProblem);
    expect(stale).toMatchObject({ status: 409, code: "run_not_latest" });
  });

  it("surfaces errors as ApiProblem with the problem's status, code and detail", async () => {
    const client = createClient({ baseUrl: live.url });
    const missing = crypto.randomUUID();
    const notFound = await client.getSession(missing).catch((err: unknown) => err);
    expect(notFound).toBeInstanceOf(ApiProblem);
    expect(notFound).toMatchObject({
      status: 404,
      code: "session_not_found",
      detail: `No session with id ${missing}`,
    });

    const streamNotFound = await collect(client.stream(missing, "hi")).catch((err: unknown) => err);
    expect(streamNotFound).toMatchObject({ status: 404, code: "session_not_found" });

    const session = await client.createSession();
    const run = await client.sendAsync(session.id, "hi");
    const busy = await client.send(session.id, "again").catch((err: unknown) => err);
    expect(busy).toBeInstanceOf(ApiProblem);
    expect(busy).toMatchObject({ status: 409, code: "session_busy" });
    expect((busy as ApiProblem).problem?.active_run_id).toBe(run.id);
    await collect(client.follow(run.id));

    const finished = await client.cancelRun(run.id).catch((err: unknown) => err);
    expect(finished).toMatchObject({ status: 409, code: "run_finished" });
  });

  it("sends the key as a bearer token", async () => {
    const seen: Request[] = [];
    const client = createClient({
      baseUrl: live.url,
      key: "ab_test_key",
      fetch: (request) => {
        seen.push(request);
        return fetch(request);
      },
    });
    await client.listSessions();
    expect(seen[0]?.headers.get("authorization")).toBe("Bearer ab_test_key");
  });
});
