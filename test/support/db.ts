import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Database, type DatabaseHandle, openDatabase } from "../../src/store/db.js";
import { admitRun, type NewRun } from "../../src/store/run-admission.js";
import type { RunRow } from "../../src/store/schema.js";
import { createSession } from "../../src/store/sessions.js";
import { lendPglite } from "./pglite-pool.js";
import { seedDataDir } from "./pglite-template.js";
import { createServerDatabase } from "./postgres-databases.js";

// Every database test runs on embedded PGlite, and also on the real Postgres server when
// TEST_DATABASE_URL is set (CI sets it). Each opened database is empty, migrated and private to
// its caller. On PGlite it is one this process keeps open and empties between callers
// (./pglite-pool.ts), first opened from a data dir copied from a migrated cluster made once
// (./pglite-template.ts): that takes a tenth of the time an in-memory database takes to start.
// On Postgres it is one this process lends again too, first copied from a migrated template
// database (./postgres-databases.ts).

export type Backend = "pglite" | "postgres";

const serverUrl = process.env.TEST_DATABASE_URL;

export const BACKENDS: Backend[] = serverUrl ? ["pglite", "postgres"] : ["pglite"];

/**
 * The database of the tests that drive a real agent CLI: the embedded one, every user's first. What
 * they prove is how the CLI behaves through the bridge; what of that touches the database is the
 * same code the fake-CLI tests run on every database, and each start of a real CLI costs most of a
 * second of CPU, on a machine where the suite's time is bound by CPU. (Where the database is what
 * is under test with the real CLI, as in the agent user's isolation and sessions moving between
 * instances, a test still runs on each.)
 */
export const REAL_CLI_BACKENDS: Backend[] = ["pglite"];

export interface TestDatabase extends DatabaseHandle {
  /** The connection URL (postgres only), for code that opens its own connection. */
  url?: string;
  /** Closes the handle and drops the database. */
  destroy(): Promise<void>;
}

export async function openTestDatabase(backend: Backend): Promise<TestDatabase> {
  if (backend === "pglite") {
    const handle = await lendPglite();
    return { ...handle, destroy: handle.close };
  }
  const { url, drop } = await createServerDatabase({ migrated: true });
  const handle = await openDatabase({ kind: "postgres", url, poolSize: 4 });
  return {
    ...handle,
    url,
    destroy: async () => {
      await handle.close();
      await drop();
    },
  };
}

/**
 * The back-ends as a server process is configured for them: each call of a target's function
 * makes a fresh embedded data dir or a fresh Postgres database and returns the env naming it
 * (`embedded` is the embedded one's, for tests that need one database of either kind).
 * `cleanup` removes everything made.
 */
export function serverDatabases(): {
  targets: [Backend, () => Promise<Record<string, string>>][];
  embedded(): Promise<Record<string, string>>;
  cleanup(): Promise<void>;
} {
  const made: (() => Promise<void>)[] = [];
  const embedded = async () => {
    const dir = mkdtempSync(join(tmpdir(), "agent-bridge-data-"));
    made.push(async () => rmSync(dir, { recursive: true, force: true }));
    // From an empty cluster's copy: initdb on every start cost these tests most of their time.
    await seedDataDir(dir);
    return { AGENT_BRIDGE_DATA_DIR: dir };
  };
  const targets: [Backend, () => Promise<Record<string, string>>][] = [["pglite", embedded]];
  if (serverUrl) {
    targets.push([
      "postgres",
      async () => {
        const { url, drop } = await createServerDatabase({ migrated: true });
        made.push(drop);
        return { DATABASE_URL: url };
      },
    ]);
  }
  return {
    targets,
    embedded,
    cleanup: async () => {
      for (const remove of made.splice(0)) await remove();
    },
  };
}

/**
 * A new session with one queued run, as the run manager would have admitted it; the session is
 * the key's when given.
 */
export async function insertSessionRun(
  db: Database,
  prompt = "hi",
  ownerKeyId: string | null = null,
): Promise<RunRow> {
  const session = await createSession(db, {
    ownerKeyId,
    workDir: null,
    title: null,
    agent: "claude",
    permissionMode: "acceptEdits",
    model: null,
    effort: "high",
    systemPrompt: null,
    worktree: false,
    metadata: {},
  });
  return insertRun(db, {
    sessionId: session.id,
    instanceId: null,
    agent: session.agent,
    trigger: "message",
    prompt,
    systemPrompt: null,
    idempotencyKey: null,
    requestHash: null,
  });
}

/** Writes a run as its admission does, with no bound on it. */
export async function insertRun(db: Database, input: NewRun): Promise<RunRow> {
  const admitted = await admitRun(db, input, {});
  if (!("run" in admitted)) throw new Error("a run with no bound was refused");
  return admitted.run;
}
