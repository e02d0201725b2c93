import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueKey } from "../../src/auth/keys.js";
import { createTestApp, requestAs, type TestApp } from "../support/app.js";
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

  const as = (key: string | undefined, path: string, init: RequestInit = {}) =>
    requestAs(t.app, key, path, init);
  const scrape = async () => (await as(admin, "/metrics")).text();

  it("counts a finished run: its status, cost, tokens, events, and the request that made it", async () => {
    const before = await scrape();
    const session = await (await as(user, "/v1/sessions", { method: "POST" })).json();
    const res = await as(user, `/v1/sessions/${session.id}/messages`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify({ text: "hi" }),
    });
    expect(res.status).toBe(200);
    const { run } = await res.json();
    const log = await (await as(user, `/v1/runs/${run.id}/events?events=full`)).text();
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
    const res = await as(admin, "/metrics");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
    const text = await res.text();
    expect(text).toContain("# TYPE agent_bridge_runs_finished_total counter");
    expect(sample(text, "process_resident_memory_bytes")).toBeGreaterThan(0);
    expect(text).toContain("nodejs_eventloop_lag_seconds");
  });

  it("needs an admin key: 401 without a key, 403 with another", async () => {
    expect((await as(undefined, "/metrics")).status).toBe(401);
    const res = await as(user, "/metrics");
    expect(res.status).toBe(403);
    expect(res.headers.get("content-type")).toBe("application/problem+json");
  });
});

describe("metrics opened to scrapers", () => {
  it("AGENT_BRIDGE_PUBLIC_METRICS=true serves them without a key", async () => {
    const t = await createTestApp("pglite", {
      AGENT_BRIDGE_AUTH: "keys",
      AGENT_BRIDGE_PUBLIC_METRICS: "true",
    });
    try {
      expect((await t.app.request("/metrics")).status).toBe(200);
      expect((await t.app.request("/v1/sessions")).status).toBe(401);
    } finally {
      await t.close();
    }
  });
});
