import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serverDatabases } from "../support/db.js";
import { type FakeCli, fakeCli } from "../support/fake-cli.js";
import { LARGEST_PNG } from "../support/images.js";
import { type ReverseProxy, startHaproxy, startProxy } from "../support/proxy.js";
import { type ServerProcess, startServer } from "../support/server.js";
import { SseReader } from "../support/sse.js";
import { result, systemInit, textDelta } from "../support/stream-json-lines.js";

// The README's proxy configurations ("Scaling out") in front of a real instance: what a stream
// needs of a proxy (events passed on as they happen, reconnects), the largest message body, and
// HAProxy's health check.

describe.each([
  ["nginx", startProxy],
  ["HAProxy", startHaproxy],
] as const)("behind the README's %s configuration", (proxyName, start) => {
  const databases = serverDatabases();
  let fake: FakeCli;
  let server: ServerProcess;
  let proxy: ReverseProxy;
  let go: string;

  beforeAll(async () => {
    fake = await fakeCli({ steps: [] });
    go = join(fake.dir, "go");
    server = await startServer({ ...fake.bridgeEnv, ...(await databases.embedded()) });
    proxy = await start([server.url]);
  });
  afterAll(async () => {
    await proxy?.stop();
    await server?.stop();
    await fake?.cleanup();
    await databases.cleanup();
  });

  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${proxy.url}${path}`, {
      method: "POST",
      headers: { "Content-Type": "application/json", ...headers },
      body: JSON.stringify(body),
    });
  const newSession = async () => (await (await post("/v1/sessions", {})).json()) as { id: string };

  // Its `option httpchk GET /healthz` is HTTP/1.0 without a Host header, which the instance
  // answered 400 before: every instance was marked down.
  it.runIf(proxyName === "HAProxy")("its health check finds the instance up", async () => {
    expect(await proxy.serverStates?.()).toEqual([
      { server: "a", status: "UP", check: "L7OK", code: 200 },
    ]);
  });

  it("passes each event on as it happens: the first text arrives while the CLI still works", async () => {
    await fake.setScenario({
      steps: [
        { emit: systemInit() },
        { emit: textDelta("msg_1", 0, "working") },
        { mark: "holding" },
        { waitFile: go },
        { emit: result({ result: "done" }) },
      ],
    });
    const session = await newSession();
    const stream = SseReader.of(await post(`/v1/sessions/${session.id}/messages`, { text: "go" }));
    const first = await stream.events(2);
    expect(first.map((f) => f.event)).toEqual(["run_started", "text_delta"]);
    // Only now is the CLI let go: with a buffering proxy the text would never have come.
    await writeFile(go, "");
    const rest = await stream.events();
    expect(rest.at(-1)).toMatchObject({ event: "completion", data: { status: "succeeded" } });

    // A reconnect through the proxy picks up after the last id it saw.
    const runId = (first[0]?.data as { run_id?: string } | undefined)?.run_id;
    const again = SseReader.of(
      await fetch(`${proxy.url}/v1/runs/${runId}/events`, {
        headers: { "Last-Event-ID": String(first[1]?.id) },
      }),
    );
    expect((await again.events()).map((f) => f.id)).toEqual(rest.map((f) => f.id));
  });

  it("takes a message with the largest images the bridge accepts", async () => {
    await fake.setScenario({ steps: [{ emit: systemInit() }, { emit: result({ result: "ok" }) }] });
    const session = await newSession();
    const image = { type: "image", media_type: "image/png", data: LARGEST_PNG };
    const res = await post(
      `/v1/sessions/${session.id}/messages`,
      { text: "look", attachments: [image, image, image, image] },
      { Prefer: "respond-async" },
    );
    expect(res.status).toBe(202);
  });
});
