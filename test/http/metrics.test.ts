import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueKey } from "../../src/auth/keys.js";
import { createTestApp, type TestApp } from "../support/app.js";
import { appClient } from "../support/app-client.js";
import { BACKENDS } from "../support/db.js";
import { type FakeCli, fakeCli } from "../support/fake-cli.js";
import { streamedReply } from "../support/fake-scenarios.js";
import { waitUntil } from "../support/process.js";

// GET /metrics: Prometheus text an operator scrapes with an admin key.

/** The value of the sample `name` whose labels include `labels` (0 when there is none). */
function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${name} `) && !line.startsWith(`${name}{`)) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) {
      return Number(line.slice(line.lastIndexOf(" ") + 1));
    }
  }
  return 0;
}

describe.each(BACKENDS)("metrics on %s", (backend) => {
  let t: TestApp;
  let fake: FakeCli;
  let admin: string;
  let user: string;
  beforeAll(async () => {
    fake = await fakeCli(
      streamedReply(["Hello ", "world"], { usage: { input: 100, output: 20 }, costUsd: 0.25 }),
    );
    t = await createTestApp(backend, { ...fake.bridgeEnv, AGENT_BRIDGE_AUTH: "keys" });
    admin = (await issueKey(t.database.db, { name: "admin", admin: true })).key;
    user = (await issueKey(t.database.db, { name: "user", admin: false })).key;
  });
  afterAll(async () => {
    await t.close();
    await fake.cleanup();
  });

  const as = (key?: string) => appClient(t.app, key);
  const metrics = (key?: string) => as(key).GET("/metrics", { parseAs: "text" });
  const scrape = async () => (await metrics(admin)).data ?? "";

  it("counts a finished run: its status, cost, tokens, events, and the request that made it", async () => {
    const before = await scrape();
    const session = await as(user).createSession();
    // Answered 200 with the finished run (any other answer throws).
    const { run } = await as(user).send(session.id, "hi");
    const { data: log = "" } = await as(user).GET("/v1/runs/{id}/events", {
      params: { path: { id: run.id }, query: { events: "full" } },
      parseAs: "text",
    });
    // The answer goes out before the CLI is gone; the run holds its slot until then.
    await waitUntil(() => !t.deps.runs.isActive(session.id), "the run's slot is free");
    const after = await scrape();

    const grew = (name: string, labels?: Record<string, string>) =>
      sample(after, name, labels) - sample(before, name, labels);
    expect(grew("agent_bridge_runs_finished_total", { status: "succeeded" })).toBe(1);
    expect(grew("agent_bridge_cost_usd_total")).toBeCloseTo(0.25);
    expect(grew("agent_bridge_tokens_total", { kind: "input" })).toBe(100);
    expect(grew("agent_bridge_tokens_total", { kind: "output" })).toBe(20);
    expect(grew("agent_bridge_events_stored_total")).toBe(log.match(/^event: /gm)?.length);
    expect(grew("agent_bridge_log_write_duration_seconds_count")).toBeGreaterThan(0);
    expect(
      grew("agent_bridge_http_requests_total", {
        method: "POST",
        route: "/v1/sessions/:id/messages",
        status: "200",
      }),
    ).toBe(1);
    expect(sample(after, "agent_bridge_runs", { state: "running" })).toBe(0);
  });

  it("serves the Prometheus text format, with Node's own metrics", async () => {
    const { data: text = "", response } = await metrics(admin);
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
    expect(text).toContain("# TYPE agent_bridge_runs_finished_total counter");
    expect(sample(text, "process_resident_memory_bytes")).toBeGreaterThan(0);
    expect(text).toContain("nodejs_eventloop_lag_seconds");
  });

  it("needs an admin key: 401 without a key, 403 with another", async () => {
    expect((await metrics()).response.status).toBe(401);
    const { response } = await metrics(user);
    expect(response.status).toBe(403);
    expect(response.headers.get("content-type")).toBe("application/problem+json");
  });
});

describe("metrics opened to scrapers", () => {
  it("AGENT_BRIDGE_PUBLIC_METRICS=true serves them without a key", async () => {
    const t = await createTestApp("pglite", {
      AGENT_BRIDGE_AUTH: "keys",
      AGENT_BRIDGE_PUBLIC_METRICS: "true",
    });
    try {
      const api = appClient(t.app);
      expect((await api.GET("/metrics", { parseAs: "text" })).response.status).toBe(200);
      expect((await api.GET("/v1/sessions")).response.status).toBe(401);
    } finally {
      await t.close();
    }
  });
});
