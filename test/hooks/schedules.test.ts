import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildHookWorkers } from "../../src/app.js";
import type { Scheduler } from "../../src/hooks/scheduler.js";
import { createLogger } from "../../src/log.js";
import { hooks } from "../../src/store/schema.js";
import { tracingOff } from "../../src/telemetry/tracing.js";
import { createTestApp, createTestAppOn, listen, type TestApp } from "../support/app.js";
import { BACKENDS, openTestDatabase } from "../support/db.js";
import { type FakeCli, fakeCli } from "../support/fake-cli.js";
import { streamedReply } from "../support/fake-scenarios.js";
import { ManualClock } from "../support/manual-clock.js";
import { createHook, getRun, type RunJson, until } from "./support.js";

// Schedules: a hook with a cron pattern fires by itself, skips a tick (and records it) while its
// previous scheduled run is still going, and fires each tick once however many instances run. The
// schedulers run on manual clocks: a tick falls due when the test moves time to it.

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
  // The scheduler's time: a tick falls due when the test moves it there.
  const clock = new ManualClock();

  beforeAll(async () => {
    // Each run takes over a second of wall time: the next tick, moved to at once, finds it busy.
    fake = await fakeCli(streamedReply(["Nothing ", "to ", "do."], { delayMs: 300 }));
    t = await createTestApp(
      backend,
      { ...fake.bridgeEnv, AGENT_BRIDGE_SCHEDULE_TICK_MS: "200" },
      clock,
    );
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
    // The first whole second after the hook was made and after the clock's now: its first tick.
    const first =
      Math.floor(Math.max(Date.parse(hook.updated_at as string), clock.now()) / 1000) * 1000 + 1000;
    const tick = (n: number) => `schedule:${new Date(first + n * 1000).toISOString()}`;
    // Up to a scheduler pass after it: it fires, and nothing before it did.
    await clock.advanceTo(first - 1);
    expect(await deliveries(server.url, "heartbeat")).toEqual([]);
    await clock.advanceTo(first + 200);
    expect(await deliveries(server.url, "heartbeat")).toMatchObject([
      { delivery_id: tick(0), outcome: "accepted" },
    ]);
    // Its run still going, the next tick is skipped.
    await clock.advance(1000);
    const [firstRun] = await deliveries(server.url, "heartbeat");
    await until(
      async () => (await getRun(server.url, firstRun?.run_id ?? "")).status === "succeeded",
      30_000,
      "the first scheduled run's end",
    );
    // Its run over, the one after is accepted.
    await clock.advance(1000);
    const seen = await deliveries(server.url, "heartbeat");
    await fetch(`${server.url}/v1/hooks/heartbeat`, { method: "DELETE" });
    expect(seen).toMatchObject([
      { delivery_id: tick(0), outcome: "accepted" },
      { delivery_id: tick(1), outcome: "skipped" },
      { delivery_id: tick(2), outcome: "accepted" },
    ]);
    for (const d of seen) expect(d.source).toBe("schedule");

    const skipped = seen.find((d) => d.outcome === "skipped");
    expect(skipped?.run_id).toBeNull();
    expect(skipped?.detail).toMatch(/previous scheduled run .* was still going/);

    const accepted = seen.filter((d) => d.outcome === "accepted");
    const runs: RunJson[] = [];
    for (const d of accepted) runs.push(await getRun(server.url, d.run_id ?? ""));
    const [acceptedRun] = runs;
    const fireTime = accepted[0]?.delivery_id.slice("schedule:".length);
    expect(acceptedRun).toMatchObject({
      trigger: "schedule",
      prompt: `Heartbeat of heartbeat at ${fireTime}: anything to do?`,
    });
    expect(acceptedRun?.system_prompt).toContain("scheduled invocation");
    expect(acceptedRun?.system_prompt).toContain("Nobody is listening");
    expect(acceptedRun?.system_prompt).toContain(`fired at ${fireTime}`);
    expect(acceptedRun?.system_prompt).toContain("Europe/Berlin");
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

describe.skipIf(!process.env.TEST_DATABASE_URL)("two instances on one Postgres", () => {
  interface Instance {
    t: TestApp;
    clock: ManualClock;
    scheduler: Scheduler;
    /** The ticks it logged as fired. */
    fired: () => number;
  }
  const instances: Instance[] = [];
  let fake: FakeCli;
  let server: { url: string; close(): Promise<void> } | undefined;
  afterAll(async () => {
    await server?.close();
    for (const { scheduler } of instances) await scheduler.stop();
    // B shares A's database, which A's close drops: B's runs end first.
    const [a, b] = instances;
    await b?.t.deps.runs.shutdown(0);
    await b?.t.deps.gateway.close();
    await a?.t.close();
    await fake?.cleanup();
  });

  it("fire each tick once", async () => {
    fake = await fakeCli(streamedReply(["ok"]));
    const database = await openTestDatabase("postgres");
    const env = { ...fake.bridgeEnv, AGENT_BRIDGE_SCHEDULE_TICK_MS: "100" };
    const start = Date.now();
    for (let i = 0; i < 2; i++) {
      const lines: string[] = [];
      const logger = createLogger("info", {}, (line) => lines.push(line));
      // A clock each: their passes race, as two processes' would.
      const clock = new ManualClock(start);
      const t = createTestAppOn(database, env, logger, tracingOff, clock);
      const { scheduler } = buildHookWorkers(t.deps);
      scheduler.start();
      const fired = () => lines.filter((line) => line.includes('"msg":"schedule fired"')).length;
      instances.push({ t, clock, scheduler, fired });
    }
    const [a, b] = instances;
    if (!a || !b) throw new Error("two instances expected");
    server = await listen(a.t.app);
    const { url } = server;
    const hook = await createHook(url, { name: "both", ...everySecond, schedule: "*/2 * * * * *" });
    // The first even second after the hook was made: its first tick.
    const first = Math.floor(Date.parse(hook.updated_at as string) / 2000) * 2000 + 2000;
    const tick = (n: number) => `schedule:${new Date(first + n * 2000).toISOString()}`;
    for (let n = 0; n < 3; n++) {
      // Both move past the tick together, then its run ends, so that the next is not skipped.
      await Promise.all(instances.map(({ clock }) => clock.advanceTo(first + n * 2000 + 100)));
      const [fired] = (await deliveries(url, "both")).slice(n);
      await until(
        async () => (await getRun(url, fired?.run_id ?? "")).status === "succeeded",
        30_000,
        `the run of tick ${n}`,
      );
    }
    const list = await deliveries(url, "both");
    expect(list).toMatchObject(
      [0, 1, 2].map((n) => ({ delivery_id: tick(n), outcome: "accepted" })),
    );
    // One CLI process per tick, over both instances.
    expect((await fake.invocations()).length).toBe(3);
    // Each tick was fired (and logged) by one of the two, never both.
    expect(a.fired() + b.fired()).toBe(3);
  });
});
