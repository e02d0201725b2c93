import { eq, sql } from "drizzle-orm";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { CompletionsUnstoredError, ShuttingDownError } from "../../src/runs/errors.js";
import { toHandover } from "../../src/runs/handover.js";
import { NO_RUN_OPTIONS } from "../../src/runs/message.js";
import { type DatabaseHandle, openDatabase } from "../../src/store/db.js";
import { runs } from "../../src/store/schema.js";
import { createTestAppOn, type TestApp } from "../support/app.js";
import { insertSessionRun } from "../support/db.js";
import { type FakeCli, fakeCli } from "../support/fake-cli.js";
import { type PgProxy, startPgProxy } from "../support/pg-proxy.js";
import { createServerDatabase } from "../support/postgres-databases.js";
import { waitUntil } from "../support/process.js";
import { result, systemInit } from "../support/stream-json-lines.js";

// An instance claims a queued run from the shared queue, and the database goes away before the
// run starts, for longer than the outage bound: the run can be neither started nor given back.
// Or the database goes away as it answers the claim: the run is the instance's, and the instance
// does not know it. Either way the run was left this instance's, queued, for good, and once the
// instance stopped (its end recorded) no other instance would claim or reap it. It is given back,
// by its claim's token, when the database is back.

describe.skipIf(!process.env.TEST_DATABASE_URL)("a claimed run the database took away", () => {
  let fake: FakeCli;
  let direct: DatabaseHandle;
  let proxy: PgProxy;
  let t: TestApp;
  const RAN = { steps: [{ emit: systemInit() }, { emit: result({ result: "ran" }) }] };
  beforeAll(async () => {
    fake = await fakeCli(RAN);
  });
  afterAll(() => fake.cleanup());

  /** The app through the proxy, on a new database that the test also reads directly. */
  async function instance() {
    const { url, drop } = await createServerDatabase({ migrated: true });
    proxy = await startPgProxy(url);
    const viaProxy = await openDatabase({ kind: "postgres", url: proxy.url, poolSize: 4 });
    direct = await openDatabase({ kind: "postgres", url, poolSize: 2 });
    t = createTestAppOn(
      {
        ...viaProxy,
        url: proxy.url,
        destroy: async () => {
          await viaProxy.close();
          await direct.close();
          proxy.close();
          await drop();
        },
      },
      { ...fake.bridgeEnv, AGENT_BRIDGE_DB_OUTAGE_SECONDS: "1" },
    );
  }
  afterEach(async () => {
    proxy.up();
    await t.close();
    await fake.setScenario(RAN);
  });

  const row = async (id: string) =>
    (
      await direct.db
        .select({ status: runs.status, instanceId: runs.instanceId })
        .from(runs)
        .where(eq(runs.id, id))
    )[0];

  const CLAIM = /for update of "runs" skip locked/;
  /** The claim of the runs pinned to a host that is gone (`claimStrandedRuns`). */
  const STRANDED_CLAIM = /"pinned_host" is not null/;
  /** The read of a claimed run's session (`getSession`, src/store/sessions.ts). */
  const SESSION_READ = /from "sessions" where \(?"sessions"\."id" = \$1/;
  /** A cancel's claim of a run queued for any instance (src/store/run-claims.ts, `claimRun`). */
  const CANCEL_CLAIM = /where \("runs"\."id" = \$3 and "runs"\."status" = \$4/;

  /**
   * A queued run nobody owns, as a message written for any instance leaves it (pinned to `host`,
   * where the session's worktree is).
   */
  async function queuedForAny(host: string | null = null): Promise<string> {
    const { id } = await insertSessionRun(direct.db);
    // What the message set for the run.
    await direct.db
      .update(runs)
      .set({ handover: toHandover({ options: NO_RUN_OPTIONS, resumeAt: null }), pinnedHost: host })
      .where(eq(runs.id, id));
    return id;
  }

  /**
   * A queued run nobody owns, claimed by the app as the database goes down, the claim's answer
   * `delivered` (the run then neither starts nor goes back) or `lost`.
   */
  async function claimDuringOutage(answer: "delivered" | "lost"): Promise<string> {
    const id = await queuedForAny();
    if (answer === "delivered") void proxy.downAfterAnswer(CLAIM);
    else void proxy.downLosingAnswer(CLAIM);
    await t.deps.runs.pullWork();
    // Claimed, and neither started nor given back.
    expect(await row(id)).toEqual({ status: "queued", instanceId: t.deps.lease.id });
    proxy.up();
    return id;
  }

  describe.each(["delivered", "lost"] as const)("the claim's answer %s", (answer) => {
    it("is given back at the next claim once the database is back, and runs", async () => {
      await instance();
      const id = await claimDuringOutage(answer);
      const stored = new Promise<void>((resolve) =>
        t.deps.runs.onCompletion((runId) => runId === id && resolve()),
      );
      await t.deps.runs.pullWork();
      await stored;
      expect(await row(id)).toEqual({ status: "succeeded", instanceId: t.deps.lease.id });
    });

    it("is given back when the instance stops, before it records its end", async () => {
      await instance();
      const id = await claimDuringOutage(answer);
      await t.deps.runs.shutdown(0);
      expect(await row(id)).toEqual({ status: "queued", instanceId: null });
    });
  });

  it("a claim still failing as the instance stops is given back once it has failed", async () => {
    await instance();
    const id = await queuedForAny();
    const down = proxy.downAfterAnswer(CLAIM);
    const claiming = t.deps.runs.pullWork();
    // Claimed, and the run not started yet.
    await down;
    const stopping = t.deps.runs.shutdown(0);
    await claiming;
    // The claim has failed, its run still this instance's; shutdown gives it back once it can.
    expect(await row(id)).toEqual({ status: "queued", instanceId: t.deps.lease.id });
    proxy.up();
    await stopping;
    expect(await row(id)).toEqual({ status: "queued", instanceId: null });
  });

  it("no claim follows shutdown's last give-back: a cancel then leaves the run to the others", async () => {
    await instance();
    const id = await queuedForAny();
    await t.deps.runs.shutdown(0);
    await expect(t.deps.runs.cancel(id)).rejects.toThrow(ShuttingDownError);
    expect(await row(id)).toEqual({ status: "queued", instanceId: null });
  });

  it("a cancel whose claim's answer was lost: the next cancel ends the run, never started", async () => {
    await instance();
    const started = (await fake.invocations()).length;
    const id = await queuedForAny();
    void proxy.downLosingAnswer(CANCEL_CLAIM);
    await expect(t.deps.runs.cancel(id)).rejects.toThrow();
    expect(await row(id)).toEqual({ status: "queued", instanceId: t.deps.lease.id });
    proxy.up();
    await t.deps.runs.cancel(id);
    expect(await row(id)).toEqual({ status: "cancelled", instanceId: t.deps.lease.id });
    expect(await fake.invocations()).toHaveLength(started);
  });

  it("a cancel that takes one of a failed claim's runs leaves the claim's others to give back", async () => {
    await instance();
    // Two runs pinned to a host no instance lives on: one claim takes both, to close them.
    const [a, b] = [await queuedForAny("gone-host"), await queuedForAny("gone-host")];
    void proxy.downLosingAnswer(STRANDED_CLAIM);
    await expect(t.deps.runs.closeStranded()).rejects.toThrow();
    proxy.up();
    for (const id of [a, b]) {
      expect(await row(id)).toEqual({ status: "queued", instanceId: t.deps.lease.id });
    }
    await t.deps.runs.cancel(a);
    expect(await row(a)).toMatchObject({ status: "cancelled" });
    await t.deps.runs.pullWork();
    expect(await row(b)).toEqual({ status: "queued", instanceId: null });
  });

  it("a completion the database would not take fails the shutdown: the instance's end is not recorded", async () => {
    await instance();
    const id = await queuedForAny();
    // The cancel claims the run and reads its session; then the database goes.
    void proxy.downAfterAnswer(SESSION_READ);
    await t.deps.runs.cancel(id);
    await expect(t.deps.runs.shutdown(0)).rejects.toThrow(CompletionsUnstoredError);
    expect(await row(id)).toEqual({ status: "queued", instanceId: t.deps.lease.id });
  });

  it("a claim its instance gave up on, committed after the next give-back, is given back at a later one", async () => {
    await instance();
    const id = await queuedForAny();
    // The claim's update waits for a lock the test holds, as a statement held up in its
    // backend does; the instance's connection is lost meanwhile, and the backend goes on.
    await direct.db.execute(sql`
      create function hold_claim() returns trigger language plpgsql as $$
      begin perform pg_advisory_xact_lock(4242); return new; end $$`);
    await direct.db.execute(sql`
      create trigger hold_claim before update on runs for each row
      when (old.instance_id is null and new.instance_id is not null) execute function hold_claim()`);
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let locked = () => {};
    const lockHeld = new Promise<void>((resolve) => {
      locked = resolve;
    });
    const holding = direct.db.transaction(async (tx) => {
      await tx.execute(sql`select pg_advisory_xact_lock(4242)`);
      locked();
      await held;
    });
    try {
      // Held before the claim: a claim that came first would take the lock, commit and run.
      await Promise.race([lockHeld, holding]);
      const claiming = t.deps.runs.pullWork();
      const waiting = async () => {
        const [locks] = (await direct.db.execute(
          sql`select count(*)::int as n from pg_locks, pg_database d
            where locktype = 'advisory' and objid = 4242 and not granted
            and database = d.oid and d.datname = current_database()`,
        )) as unknown as { n: number }[];
        return locks?.n === 1;
      };
      await waitUntil(waiting, "the claim waiting in its backend");
      proxy.cutClientOf(CLAIM);
      await claiming;
      // The next claim's give-back finds nothing of that claim: its update has not committed.
      await t.deps.runs.pullWork();
      expect(await row(id)).toEqual({ status: "queued", instanceId: null });
    } finally {
      // Failing too: the lock's transaction would otherwise hold the test's database.
      release();
      await holding;
    }
    const committed = async () => (await row(id))?.instanceId === t.deps.lease.id;
    await waitUntil(committed, "the claim committed in its backend");
    const stored = new Promise<void>((resolve) =>
      t.deps.runs.onCompletion((runId) => runId === id && resolve()),
    );
    await t.deps.runs.pullWork();
    await stored;
    expect(await row(id)).toEqual({ status: "succeeded", instanceId: t.deps.lease.id });
  });
});
