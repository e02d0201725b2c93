import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import postgres from "postgres";
import { type Database, type DatabaseHandle, openDatabase } from "../../src/store/db.js";
import { insertRun } from "../../src/store/runs.js";
import type { RunRow } from "../../src/store/schema.js";
import { createSession } from "../../src/store/sessions.js";
import { lendPglite } from "./pglite-pool.js";
import { migrationsDigest, seedDataDir } from "./pglite-template.js";

// Every database test runs on embedded PGlite, and also on the real Postgres server when
// TEST_DATABASE_URL is set (CI sets it). Each opened database is empty, migrated and private to
// its caller. On PGlite it is one this process keeps open and empties between callers
// (./pglite-pool.ts), first opened from a data dir copied from a migrated cluster made once
// (./pglite-template.ts): that takes a tenth of the time an in-memory database takes to start.
// On Postgres it is made from a migrated template database, made once too: running every
// migration cost each new database 150 ms, of which the server's CPU was most.

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

/** Creates a database on the Postgres server at `serverUrl`, a copy of `template` if named; returns its URL. */
export async function createDatabaseOn(
  serverUrl: string,
  name: string,
  template?: string,
): Promise<string> {
  await onServer(serverUrl, (admin) =>
    admin.unsafe(`create database ${name}${template ? ` template ${template}` : ""}`),
  );
  return databaseUrl(serverUrl, name);
}

/** Runs `work` over one connection to the Postgres server at `serverUrl`, closed after. */
async function onServer<T>(serverUrl: string, work: (admin: postgres.Sql) => Promise<T>) {
  const admin = postgres(serverUrl, { max: 1, onnotice: () => {} });
  try {
    return await work(admin);
  } finally {
    await admin.end();
  }
}

function databaseUrl(serverUrl: string, name: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/** The TEST_DATABASE_URL server's database with every migration run, and nothing else. */
const migratedTemplate = `agent_bridge_template_${migrationsDigest}`;

/**
 * Makes the migrated template database on the TEST_DATABASE_URL server unless an earlier run made
 * it: the test run's global setup does, before any test process starts. It is made under another
 * name and renamed when done, so that a maker killed midway leaves no half-migrated template.
 */
export async function makeMigratedTemplate(): Promise<void> {
  const url = serverUrl;
  if (!url) return;
  await onServer(url, async (admin) => {
    const exists = async () =>
      (await admin`select 1 from pg_database where datname = ${migratedTemplate}`).length > 0;
    if (await exists()) return;
    const making = `agent_bridge_template_making_${randomBytes(4).toString("hex")}`;
    await admin.unsafe(`create database ${making}`);
    try {
      await (await openDatabase({ kind: "postgres", url: databaseUrl(url, making) })).close();
      // A rename waits for no connection: those the migration used may still be going away.
      await admin`select pg_terminate_backend(pid) from pg_stat_activity where datname = ${making}`;
      await admin.unsafe(`alter database ${making} rename to ${migratedTemplate}`);
    } catch (err) {
      await admin.unsafe(`drop database if exists ${making} with (force)`);
      // Another run's setup may have made it meanwhile.
      if (!(await exists())) throw err;
    }
  });
}

/**
 * A fresh database on the TEST_DATABASE_URL server: empty, as an operator's new database is, or
 * with every migration run (`migrated`), as the server leaves it at its first start.
 */
export async function createServerDatabase(
  options: { migrated?: boolean } = {},
): Promise<{ url: string; drop: () => Promise<void> }> {
  if (!serverUrl) throw new Error("TEST_DATABASE_URL is not set");
  const name = `agent_bridge_test_${randomBytes(6).toString("hex")}`;
  const template = options.migrated ? migratedTemplate : undefined;
  return {
    url: await createDatabaseOn(serverUrl, name, template),
    drop: async () => {
      await onServer(serverUrl, (admin) =>
        admin.unsafe(`drop database if exists ${name} with (force)`),
      );
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
