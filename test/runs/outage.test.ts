import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDatabase } from "../../src/store/db.js";
import { listEventBatches } from "../../src/store/events.js";
import { type AgentCase, agentMatrix } from "../support/agents.js";
import { createTestAppOn, httpApi, listen, type TestApp } from "../support/app.js";
import { type FakeScenario, fakeCli } from "../support/fake-cli.js";
import { type OwnPostgres, ownPostgresAvailable, startOwnPostgres } from "../support/pg-server.js";
import { createDatabaseOn, onServer } from "../support/postgres-databases.js";
import { waitUntil } from "../support/process.js";
import { type ServerProcess, startServer } from "../support/server.js";
import { SseReader } from "../support/sse.js";

// The database goes away under a running run (a Postgres restart, a failover): the run's log
// keeps every event, in order, without a gap, as long as the outage stays within the bound; past
// it the run fails, says why, and its log is still contiguous. The server owned by this test is
// stopped and started; the machine's shared one is never touched.

const BEFORE = 20;
const DURING = 30;

/** Says BEFORE numbers, waits for the test, says DURING more (the test has stopped the database by then), and succeeds. */
function outageScenario(go: string): FakeScenario {
  const say = (i: number) => ({ reply: { parts: [`${i}`] } });
  return {
    steps: [
      { init: true },
      ...Array.from({ length: BEFORE }, (_, i) => say(i)),
      { mark: "before" },
      { waitFile: go },
      ...Array.from({ length: DURING }, (_, i) => say(BEFORE + i)),
      { succeed: {} },
      { mark: "result" },
    ],
  };
}

/** What each text delta says, in order (each message is a paragraph of its own). */
const expectedSaid = Array.from({ length: BEFORE + DURING }, (_, i) => `${i}`);

describe.runIf(ownPostgresAvailable)("a database outage during a run", () => {
  let pg: OwnPostgres;
  beforeAll(async () => {
    pg = await startOwnPostgres();
  });
  afterAll(() => pg?.destroy());

  // Every connection of the pool refused at once sent postgres.js's shared reconnect backoff to
  // 10-20 s: statements asked for once the database was back waited that long for a connection
  // (a run's events, a shutdown's last writes). Now each connection tries again within a second.
  it("once the database is back, every connection of the pool answers at once, whatever it met during the outage", async () => {
    const url = await createDatabaseOn(pg.url, `reconnect_${randomBytes(4).toString("hex")}`);
    const handle = await openDatabase({ kind: "postgres", url, poolSize: 10 });
    const tenAtOnce = () =>
      Promise.allSettled(Array.from({ length: 10 }, () => handle.db.execute(sql`select 1`)));
    try {
      pg.stop();
      expect((await tenAtOnce()).map((r) => r.status)).toEqual(Array(10).fill("rejected"));
      pg.start();
      const asked = performance.now();
      // Each on a connection of its own that the outage closed: none fails with what the
      // server said as it went (57P01, porsager/postgres#1223; patches/).
      const again = await tenAtOnce();
      expect(
        again.map((r) => (r.status === "rejected" ? String(r.reason.cause) : "answered")),
      ).toEqual(Array(10).fill("answered"));
      // The old backoff kept the last connections at least 10 s; the new one at most 1 s.
      expect(performance.now() - asked).toBeLessThan(5000);
    } finally {
      pg.ensureStarted();
      await handle.close();
    }
  });

  // A database that answers nothing fails no statement: shutdown must not wait on it for good.
  describe("a server told to stop while its database answers nothing", () => {
    let thaw: (() => void) | undefined;
    let server: ServerProcess | undefined;
    // Before the server's own Postgres is stopped, should the test have failed with both hanging.
    afterAll(async () => {
      thaw?.();
      await server?.stop("SIGKILL");
    });

    it("exits within its bound, saying what it waited on", { timeout: 120_000 }, async () => {
      const url = await createDatabaseOn(pg.url, `frozen_${randomBytes(4).toString("hex")}`);
      server = await startServer({
        DATABASE_URL: url,
        AGENT_BRIDGE_SHUTDOWN_GRACE_SECONDS: "0",
        AGENT_BRIDGE_DB_OUTAGE_SECONDS: "1",
        AGENT_BRIDGE_CALLBACK_TIMEOUT_MS: "100",
      });
      thaw = pg.freeze();
      server.child.kill("SIGTERM");
      // No wait of its own: the test's timeout bounds it (the server's bound is 13.1 s here: the
      // grace, 0, three outage bounds, 3 s, the callback timeout, 0.1 s, and 10 s).
      expect(await server.exited).toBe(1);
      // What it waited on, said while it waited: a step of its stop that needs the database,
      // whichever had a statement on an open connection as the database froze (a statement sent
      // on a new connection times out instead): the session sweep, the scheduler's tick, a
      // claim of the runs', the lease.
      expect(server.output()).toMatch(
        /"msg":"shutdown is waiting","on":"(the session sweep|the scheduler|the runs|the instance's lease)"/,
      );
      // And what it gave up: the step it waited on and those after it.
      expect(server.output()).toMatch(
        /"msg":"shutdown did not finish in time; exiting without it","bound_ms":13100,"abandoned":\[[^\]]* and every step after it"\],"runs_left_to_recovery":\[\]/,
      );
    });
  });

  // Its database gone while a stop waits on a run: dropped (as a test's cleanup once dropped it
  // under a running server), or its server stopped. The run's completion cannot be stored, so the
  // instance must not record its end either (an ended instance's runs are never reaped): the
  // stop exits 1 within the grace and the outage bound, saying what it left to recovery.
  describe.each(["dropped", "stopped"])(
    "a server whose database is %s during its shutdown",
    (how) => {
      it("exits 1 within its bound, naming what it left to recovery", {
        timeout: 120_000,
      }, async () => {
        const name = `gone_${randomBytes(4).toString("hex")}`;
        const url = await createDatabaseOn(pg.url, name);
        const goDir = mkdtempSync(join(tmpdir(), "gone-"));
        const fake = await fakeCli({
          steps: [
            { init: true },
            { reply: { parts: ["working"] } },
            { waitFile: join(goDir, "never") },
          ],
        });
        const server = await startServer({
          ...fake.bridgeEnv,
          DATABASE_URL: url,
          AGENT_BRIDGE_SHUTDOWN_GRACE_SECONDS: "1",
          AGENT_BRIDGE_DB_OUTAGE_SECONDS: "2",
        });
        try {
          const session = (await (
            await fetch(`${server.url}/v1/sessions`, { method: "POST" })
          ).json()) as { id: string };
          const res = await fetch(`${server.url}/v1/sessions/${session.id}/messages`, {
            method: "POST",
            headers: { "Content-Type": "application/json" },
            body: JSON.stringify({ text: "work" }),
          });
          const runId = res.headers.get("x-run-id") ?? "";
          // The run is under way.
          expect((await SseReader.of(res).events(2)).map((f) => f.event)).toEqual([
            "run_started",
            "text_delta",
          ]);
          server.child.kill("SIGTERM");
          await server.waitForOutput(/"msg":"shutting down"/);
          if (how === "dropped") {
            await onServer(pg.url, (admin) => admin.unsafe(`drop database ${name} with (force)`));
          } else pg.stop();

          // No wait of its own: the test's timeout bounds it.
          expect(await server.exited).toBe(1);
          const said = server.output();
          // It finished by itself, without the last resort of its bound.
          expect(said).not.toMatch(/shutdown did not finish in time/);
          const undone = said
            .split("\n")
            .find((line) => line.includes('"msg":"shutdown left work undone; exiting 1"'));
          expect(undone, said).toBeDefined();
          expect(JSON.parse(undone ?? "{}")).toMatchObject({
            abandoned: ["the runs", "the instance's end (its lease is left to expire)"],
            runs_left_to_recovery: [runId],
          });
        } finally {
          await server.stop("SIGKILL");
          pg.ensureStarted();
          await fake.cleanup();
          rmSync(goDir, { recursive: true, force: true });
        }
      });
    },
  );

  // On the test's own Postgres server: claude and codex alike.
  describe.each(agentMatrix.filter((a) => a.db === "pglite"))("$agent", (agent: AgentCase) => {
    /**
     * The app on a fresh database of this server, with a run of the outage scenario going and its
     * stream read up to the CLI's pause; `go()` lets the CLI write the rest.
     */
    async function appOnOwnPostgres(env: Record<string, string>) {
      const url = await createDatabaseOn(pg.url, `outage_${randomBytes(4).toString("hex")}`);
      const handle = await openDatabase({ kind: "postgres", url });
      const t = createTestAppOn({ ...handle, url, destroy: () => handle.close() }, env);
      return { t, server: await listen(t.app) };
    }

    async function countingRun(env: Record<string, string> = {}) {
      const goDir = mkdtempSync(join(tmpdir(), "outage-"));
      const goFile = join(goDir, "go");
      const fake = await agent.fake(outageScenario(goFile));
      const { t, server } = await appOnOwnPostgres({ ...fake.bridgeEnv, ...env });
      const api = httpApi(server.url);
      const sessionId = (await api.newSession()).id;
      const res = await api.postMessage(sessionId, "count");
      const reader = SseReader.of(res);
      return {
        t,
        sessionId,
        fake,
        server,
        runId: res.headers.get("x-run-id") ?? "",
        reader,
        first: await reader.events(1 + BEFORE),
        go: () => writeFileSync(goFile, ""),
        close: async () => {
          pg.ensureStarted();
          await server.close();
          await t.close();
          await fake.cleanup();
          rmSync(goDir, { recursive: true, force: true });
        },
      };
    }

    async function storedLog(t: TestApp, runId: string) {
      const batches = await listEventBatches(t.database.db, runId, {
        view: "full",
        after: 0,
        fromSeq: 0,
        limit: 1000,
      });
      return batches.flat();
    }

    // Each test stops and starts a Postgres server: seconds each on a loaded machine.
    it("loses nothing when the database is back within the bound (8 s down mid-run)", {
      timeout: 180_000,
    }, async () => {
      // A bound well past the outage: stopping and starting Postgres takes seconds more when loaded.
      const { t, fake, server, runId, reader, first, go, close } = await countingRun({
        AGENT_BRIDGE_DB_OUTAGE_SECONDS: "120",
      });
      try {
        expect(first.at(-1)?.event).toBe("text_delta");
        pg.stop();
        go();
        // Meanwhile a request that needs the database is told so, without the database's text.
        const refused = await fetch(`${server.url}/v1/sessions`, { method: "POST" });
        expect(refused.status).toBe(503);
        expect(refused.headers.get("retry-after")).toBe("5");
        const problem = await refused.json();
        expect(problem).toMatchObject({ code: "database_unavailable" });
        expect(problem.detail).not.toMatch(/insert|select|sessions/i);
        // A run's view, read in one snapshot (a transaction), is refused the same way.
        const view = await fetch(`${server.url}/v1/runs/${runId}`);
        expect(view.status).toBe(503);
        expect(await view.json()).toMatchObject({ code: "database_unavailable" });
        // The CLI writes the rest of its answer while the database is down.
        await fake.waitForMark("result");
        // The outage itself lasts 8 s: longer than the log's retries used to hold out.
        await new Promise((r) => setTimeout(r, 8000));
        pg.start();

        const rest = await reader.events();
        const frames = [...first, ...rest];
        expect(frames.map((f) => f.id)).toEqual(frames.map((_, i) => String(i + 1)));
        const completion = frames.at(-1);
        expect(completion?.event).toBe("completion");
        expect(completion?.data).toMatchObject({ status: "succeeded" });
        const said = frames
          .filter((f) => f.event === "text_delta")
          .map((f) => (f.data as { text: string }).text.trim());
        expect(said).toEqual(expectedSaid);

        const stored = await storedLog(t, runId);
        expect(stored.map((e) => e.seq)).toEqual(stored.map((_, i) => i + 1));
        expect(stored.at(-1)?.type).toBe("completion");
        const shown = stored.filter((e) => e.publicSeq !== null);
        expect(shown.map((e) => e.json)).toEqual(frames.map((f) => JSON.stringify(f.data)));
      } finally {
        await close();
      }
    });

    it("past the bound the run fails, names the database, and its client gets that completion once it is stored", {
      timeout: 180_000,
    }, async () => {
      const { t, sessionId, server, runId, reader, first, go, close } = await countingRun({
        AGENT_BRIDGE_DB_OUTAGE_SECONDS: "2",
      });
      try {
        pg.stop();
        go();
        // The run's end is known while the database is down, but not stored: the client's stream
        // waits (until the completion is stored, it could still be another instance's).
        await waitUntil(
          async () => !t.deps.runs.isActive(sessionId),
          "the run's end, held unstored",
          60_000,
        );
        pg.start();
        const rest = await reader.events();
        const frames = [...first, ...rest];
        expect(frames.map((f) => f.id)).toEqual(frames.map((_, i) => String(i + 1)));
        const completion = frames.at(-1);
        expect(completion?.event).toBe("completion");
        expect(completion?.data).toMatchObject({
          status: "failed",
          error: expect.stringMatching(/database is unreachable/),
        });
        const run = await (await fetch(`${server.url}/v1/runs/${runId}`)).json();
        expect(run.status).toBe("failed");
        const stored = await storedLog(t, runId);
        expect(stored.map((e) => e.seq)).toEqual(stored.map((_, i) => i + 1));
        expect(stored.at(-1)?.json).toBe(JSON.stringify(completion?.data));
      } finally {
        await close();
      }
    });
  });
});
