import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildHookWorkers } from "../../src/app.js";
import type { Scheduler } from "../../src/hooks/scheduler.js";
import { hooks } from "../../src/store/schema.js";
import { createTestApp, listen, type TestApp } from "../support/app.js";
import { BACKENDS } from "../support/db.js";
import { type FakeCli, fakeCli } from "../support/fake-cli.js";
import { streamedReply } from "../support/fake-scenarios.js";
import { createServerDatabase } from "../support/postgres-databases.js";
import { type ServerProcess, startServer } from "../support/server.js";
import { createHook, getRun, type RunJson, until } from "./support.js";

// Schedules: a hook with a cron pattern fires by itself, skips a tick (and records it) while its
// previous scheduled run is still going, and fires each tick once however many servers run.

interface Delivery {
  delivery_id: string;
  source: string;
  outcome: string;
  detail: string | null;
  run_id: string | null;
}

async function deliveries(base: string, hook: string): Promise<Delivery[]> {
  const res = await fetch(`${base}/v1/hooks/${hook}/deliveries?limit=100`);
  return ((await res.json()) as { data: Delivery[] }).data.reverse();
}

const everySecond = {
  verification: "bearer",
  secret: "bearer-secret-0123456789",
  prompt_template: "Heartbeat of {{hook}} at {{fire_time}}: anything to do?",
  schedule: "* * * * * *",
  timezone: "Europe/Berlin",
};

describe.each(BACKENDS)("schedules on %s", (backend) => {
  let fake: FakeCli;
  let t: TestApp;
  let scheduler: Scheduler;
  let server: { url: string; close(): Promise<void> };

  beforeAll(async () => {
    // Each run takes about 2.5 s, so that an every-second schedule finds it busy.
    fake = await fakeCli(streamedReply(["Nothing ", "to ", "do."], { delayMs: 800 }));
    t = await createTestApp(backend, { ...fake.bridgeEnv, AGENT_BRIDGE_SCHEDULE_TICK_MS: "200" });
    ({ scheduler } = buildHookWorkers(t.deps));
    scheduler.start();
    server = await listen(t.app);
  });
  afterAll(async () => {
    await scheduler.stop();
    await server.close();
    await t.close();
    await fake.cleanup();
  });

  it("fires at each tick with the scheduled framing, skipping ticks while its run is going", async () => {
    const hook = await createHook(server.url, { name: "heartbeat", ...everySecond });
    expect(hook.next_fire_at).toEqual(expect.any(String));
    const seen = await until(
      async () => {
        const all = await deliveries(server.url, "heartbeat");
        const accepted = all.filter((d) => d.outcome === "accepted");
        return accepted.length >= 2 && all.some((d) => d.outcome === "skipped") && all;
      },
      30_000,
      "two scheduled runs and a skipped tick",
    );
    await fetch(`${server.url}/v1/hooks/heartbeat`, { method: "DELETE" });

    for (const d of seen) {
      expect(d.source).toBe("schedule");
      expect(d.delivery_id).toMatch(/^schedule:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000Z$/);
    }
    // Ticks a second apart, each once.
    const times = seen.map((d) => Date.parse(d.delivery_id.slice("schedule:".length)));
    for (let i = 1; i < times.length; i++) expect(times[i]).toBe((times[i - 1] ?? 0) + 1000);

    const skipped = seen.find((d) => d.outcome === "skipped");
    expect(skipped?.run_id).toBeNull();
    expect(skipped?.detail).toMatch(/previous scheduled run .* was still going/);

    const accepted = seen.filter((d) => d.outcome === "accepted");
    const runs: RunJson[] = [];
    for (const d of accepted) runs.push(await getRun(server.url, d.run_id ?? ""));
    const [firstRun] = runs;
    const fireTime = accepted[0]?.delivery_id.slice("schedule:".length);
    expect(firstRun).toMatchObject({
      trigger: "schedule",
      prompt: `Heartbeat of heartbeat at ${fireTime}: anything to do?`,
    });
    expect(firstRun?.system_prompt).toContain("scheduled invocation");
    expect(firstRun?.system_prompt).toContain("Nobody is listening");
    expect(firstRun?.system_prompt).toContain(`fired at ${fireTime}`);
    expect(firstRun?.system_prompt).toContain("Europe/Berlin");
    // Without a session key, every tick is a new session.
    expect(new Set(runs.map((r) => r.session_id)).size).toBe(runs.length);
  });

  it("refuses a schedule that is not a cron pattern, or a time zone that does not exist", async () => {
    const bad = async (body: Record<string, unknown>) =>
      fetch(`${server.url}/v1/hooks`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ name: "bad", ...everySecond, ...body }),
      });
    const pattern = await bad({ schedule: "every minute" });
    expect(pattern.status).toBe(400);
    expect((await pattern.json()).errors[0].path).toBe("schedule");
    const zone = await bad({ timezone: "Mars/Olympus" });
    expect(zone.status).toBe(400);
  });

  const notCron: [string, string][] = [
    ["seven fields", "* * * * * * *"],
    ["seven fields, a year last", "0 0 12 * * * 2030"],
    ["four fields", "* * * *"],
    ["a date that never comes (30 February)", "0 0 30 2 *"],
    ["a date that never comes (31 April), with seconds", "0 0 0 31 4 *"],
  ];

  /** Sends `body` and expects a 400 naming `schedule`, with `why` in its message. */
  async function refusedSchedule(path: string, method: string, body: object, why: RegExp) {
    const res = await t.app.request(path, {
      method,
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(400);
    expect(res.headers.get("content-type")).toBe("application/problem+json");
    const problem = await res.json();
    expect(problem.code).toBe("validation_failed");
    expect(problem.errors).toEqual([
      { location: "body", path: "schedule", message: expect.stringMatching(why) },
    ]);
  }

  const whyRefused = (pattern: string) =>
    pattern.split(" ").length === 5 || pattern.split(" ").length === 6
      ? /never fires/
      : /5 fields, or 6 with seconds first/;

  it.each(notCron)(
    "refuses at creation a schedule that is not 5 or 6 fields or never fires (%s), storing nothing",
    async (_what, schedule) => {
      const name = `not-cron-${crypto.randomUUID()}`;
      await refusedSchedule(
        "/v1/hooks",
        "POST",
        { name, ...everySecond, schedule },
        whyRefused(schedule),
      );
      expect((await t.app.request(`/v1/hooks/${name}`)).status).toBe(404);
    },
  );

  it.each(notCron)(
    "refuses at update a schedule that is not 5 or 6 fields or never fires (%s), changing nothing",
    async (_what, schedule) => {
      const name = `not-cron-${crypto.randomUUID()}`;
      const { schedule: _, timezone: __, ...unscheduled } = everySecond;
      const made = await t.app.request("/v1/hooks", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ name, ...unscheduled, schedule: "0 6 * * 1-5" }),
      });
      expect(made.status).toBe(201);
      const before = await made.json();
      await refusedSchedule(
        `/v1/hooks/${name}`,
        "PUT",
        { ...unscheduled, schedule },
        whyRefused(schedule),
      );
      const after = await (await t.app.request(`/v1/hooks/${name}`)).json();
      expect(after).toEqual(before);
      await t.app.request(`/v1/hooks/${name}`, { method: "DELETE" });
    },
  );

  it("never fires a seven-field schedule stored before such schedules were refused", async () => {
    const name = `seven-${crypto.randomUUID()}`;
    const { schedule: _, timezone: __, ...unscheduled } = everySecond;
    const made = await t.app.request("/v1/hooks", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ name, ...unscheduled, schedule: "0 0 1 1 *" }),
    });
    expect(made.status).toBe(201);
    await t.database.db
      .update(hooks)
      .set({ schedule: "* * * * * * *" })
      .where(eq(hooks.name, name));
    const hook = await (await t.app.request(`/v1/hooks/${name}`)).json();
    expect(hook).toMatchObject({ schedule: "* * * * * * *", next_fire_at: null });
    // Five seconds of an every-second pattern, had it been read as one.
    await scheduler.tick(new Date(Date.now() + 5_000));
    expect(await deliveries(server.url, name)).toEqual([]);
    await t.app.request(`/v1/hooks/${name}`, { method: "DELETE" });
  });
});

describe.skipIf(!process.env.TEST_DATABASE_URL)("two servers on one Postgres", () => {
  const servers: ServerProcess[] = [];
  let fake: FakeCli;
  let drop: () => Promise<void>;
  afterAll(async () => {
    for (const s of servers) await s.stop("SIGKILL");
    await fake?.cleanup();
    await drop?.();
  });

  it("fire each tick once", async () => {
    fake = await fakeCli(streamedReply(["ok"]));
    const database = await createServerDatabase({ migrated: true });
    drop = database.drop;
    const env = {
      DATABASE_URL: database.url,
      ...fake.bridgeEnv,
      AGENT_BRIDGE_SCHEDULE_TICK_MS: "100",
    };
    servers.push(await startServer(env), await startServer(env));
    const [a, b] = servers;
    if (!a || !b) throw new Error("two servers expected");
    await createHook(a.url, { name: "both", ...everySecond, schedule: "*/2 * * * * *" });
    await until(
      async () =>
        (await deliveries(b.url, "both")).filter((d) => d.outcome === "accepted").length >= 3,
      30_000,
      "three ticks",
    );
    // Unscheduled (not deleted, so that its deliveries stay listed); a pass under way may end.
    const { schedule: _, timezone: __, ...unscheduled } = everySecond;
    const put = await fetch(`${b.url}/v1/hooks/both`, {
      method: "PUT",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(unscheduled),
    });
    expect(put.status).toBe(200);
    await new Promise((r) => setTimeout(r, 1000));
    const list = await deliveries(a.url, "both");
    const ticks = list.map((d) => d.delivery_id);
    expect(new Set(ticks).size).toBe(ticks.length);
    const times = ticks.map((id) => Date.parse(id.slice("schedule:".length)));
    for (let i = 1; i < times.length; i++) expect(times[i]).toBe((times[i - 1] ?? 0) + 2000);
    // One CLI process per accepted tick, over both servers.
    await until(async () => {
      const runs = await Promise.all(
        list.map((d) => (d.run_id ? getRun(a.url, d.run_id) : undefined)),
      );
      return runs.every((r) => !r || !["queued", "running"].includes(r.status));
    });
    const accepted = list.filter((d) => d.outcome === "accepted").length;
    expect((await fake.invocations()).length).toBe(accepted);
    // Each tick was fired (and logged) by one of the two, never both.
    const fired = (s: ServerProcess) => s.output().match(/"msg":"schedule fired"/g)?.length ?? 0;
    expect(fired(a) + fired(b)).toBe(list.length);
  });
});
