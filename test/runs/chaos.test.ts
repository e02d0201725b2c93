import { randomBytes } from "node:crypto";
import { inArray } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { groupAlive } from "../../src/process/groups.js";
import { type Database, openDatabase } from "../../src/store/db.js";
import { listEventBatches } from "../../src/store/events.js";
import { runs } from "../../src/store/schema.js";
import { type AgentCase, agentMatrix } from "../support/agents.js";
import type { FakeCli } from "../support/fake-cli.js";
import { streamedReply } from "../support/fake-scenarios.js";
import { type OwnPostgres, ownPostgresAvailable, startOwnPostgres } from "../support/pg-server.js";
import { createDatabaseOn } from "../support/postgres-databases.js";
import { type ServerProcess, startServer } from "../support/server.js";

/** Every run not closed yet, whichever instance owns it. */
const openRuns = (db: Database) =>
  db
    .select()
    .from(runs)
    .where(inArray(runs.status, ["queued", "running", "waiting"]));

// Chaos: 50 runs while the database is stopped twice and the server is killed with SIGKILL once.
// Afterwards every run's stored log runs from 1 without a gap to its one completion, last, and no
// CLI process is left.

const RUNS = 50;
const PARTS = Array.from({ length: 20 }, (_, i) => `part ${i} `);

// On the test's own Postgres server: claude and codex alike.
const agents = agentMatrix.filter((a) => a.db === "pglite");

describe.runIf(ownPostgresAvailable).each(agents)("chaos, $agent", (agent: AgentCase) => {
  let pg: OwnPostgres;
  let fake: FakeCli;
  let url: string;
  let env: Record<string, string>;
  const servers: ServerProcess[] = [];

  beforeAll(async () => {
    pg = await startOwnPostgres();
    url = await createDatabaseOn(pg.url, `chaos_${randomBytes(4).toString("hex")}`);
    fake = await agent.fake(streamedReply(PARTS, { delayMs: 40 }));
    env = {
      ...fake.bridgeEnv,
      DATABASE_URL: url,
      AGENT_BRIDGE_MAX_CONCURRENT_RUNS: "8",
      AGENT_BRIDGE_MAX_QUEUED_RUNS: "64",
      AGENT_BRIDGE_SHUTDOWN_GRACE_SECONDS: "0",
    };
  });
  afterAll(async () => {
    for (const server of servers) await server.stop("SIGKILL");
    await fake?.cleanup();
    pg?.destroy();
  });

  /** Starts `n` runs, each on a new session, answered at once (202). */
  async function submit(server: ServerProcess, n: number): Promise<string[]> {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const session = await (await fetch(`${server.url}/v1/sessions`, { method: "POST" })).json();
      const res = await fetch(`${server.url}/v1/sessions/${session.id}/messages`, {
        method: "POST",
        headers: { "Content-Type": "application/json", Prefer: "respond-async" },
        body: JSON.stringify({ text: `run ${i}` }),
      });
      expect(res.status).toBe(202);
      ids.push(((await res.json()) as { id: string }).id);
    }
    return ids;
  }

  /** Stops the database for a few seconds: longer than a statement's retries used to last. */
  async function outage() {
    pg.stop();
    await new Promise((r) => setTimeout(r, 3000));
    pg.start();
  }

  it("every run's log is contiguous up to its one completion, and no CLI is left", async () => {
    const first = await startServer(env);
    servers.push(first);
    const before = await submit(first, RUNS / 2 - 4);
    await outage();
    // Killed while runs are in flight, whatever the machine's pace: the last few are submitted
    // just before, and each streams for 0.8 s at least.
    before.push(...(await submit(first, 4)));
    const db = await openDatabase({ kind: "postgres", url });
    try {
      expect((await openRuns(db.db)).length).toBeGreaterThan(0);
      await first.stop("SIGKILL");

      const second = await startServer(env);
      servers.push(second);
      const after = await submit(second, RUNS / 2);
      await outage();

      const all = [...before, ...after];
      const until = Date.now() + 150_000;
      while ((await openRuns(db.db)).length > 0) {
        if (Date.now() > until) {
          const left = (await openRuns(db.db)).map(
            (r) => `${r.id} ${r.status} owned by ${r.instanceId ?? "nobody"}`,
          );
          throw new Error(
            `runs still unfinished after 150 s: ${left.join(", ")}\n${second.output().slice(-4000)}`,
          );
        }
        await new Promise((r) => setTimeout(r, 200));
      }
      const statuses = new Map<string, number>();
      const unexpected: string[] = [];
      for (const runId of all) {
        const batches = await listEventBatches(db.db, runId, {
          view: "full",
          after: 0,
          fromSeq: 0,
          limit: 10_000,
        });
        const events = batches.flat();
        expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
        expect(events.filter((e) => e.type === "completion")).toHaveLength(1);
        expect(events.at(-1)?.type).toBe("completion");
        const status = (JSON.parse(events.at(-1)?.json ?? "{}") as { status: string }).status;
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
        if (status !== "succeeded" && status !== "interrupted")
          unexpected.push(`${runId}: ${events.at(-1)?.json}`);
      }
      // The runs of the second server all succeeded; those of the first were interrupted or done.
      expect(statuses.get("succeeded")).toBeGreaterThanOrEqual(RUNS / 2);
      expect(unexpected, second.output().slice(-4000)).toEqual([]);

      for (const { pid } of await fake.invocations()) expect(await groupAlive(pid)).toBe(false);
      // A clean stop, at once: statements asked for after the outages once waited out the
      // driver's reconnect backoff, up to 20 s, and held the stop (the step is in the output).
      second.child.kill("SIGTERM");
      expect(await second.exited, second.output().slice(-4000)).toBe(0);
    } finally {
      await db.close();
    }
  }, 240_000);
});
