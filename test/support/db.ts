import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import postgres from "postgres";
import { inject } from "vitest";
import { type Database, type DatabaseHandle, openDatabase } from "../../src/store/db.js";
import { insertRun } from "../../src/store/runs.js";
import type { RunRow } from "../../src/store/schema.js";
import { createSession } from "../../src/store/sessions.js";
import { seedDataDir } from "./pglite-template.js";

// Every database test runs on embedded PGlite, and also on the real Postgres server when
// TEST_DATABASE_URL is set (CI sets it). Each opened database is new and private to its caller.
// On PGlite it is a data dir copied from a migrated cluster made once (./pglite-template.ts):
// opening that takes a tenth of the time an in-memory database takes to start.

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
    const dir = mkdtempSync(join(inject("testDataDirs"), "db-"));
    await seedDataDir(dir);
    const handle = await openDatabase({ kind: "pglite", dataDir: dir });
    return {
      ...handle,
      destroy: async () => {
        await handle.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  }
  const { url, drop } = await createServerDatabase();
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

/** Creates a database on the Postgres server at `serverUrl`; returns its URL. */
export async function createDatabaseOn(serverUrl: string, name: string): Promise<string> {
  const admin = postgres(serverUrl, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`create database ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/** A fresh, empty database on the TEST_DATABASE_URL server. */
export async function createServerDatabase(): Promise<{ url: string; drop: () => Promise<void> }> {
  if (!serverUrl) throw new Error("TEST_DATABASE_URL is not set");
  const name = `agent_bridge_test_${randomBytes(6).toString("hex")}`;
  return {
    url: await createDatabaseOn(serverUrl, name),
    drop: async () => {
      const sql = postgres(serverUrl, { max: 1, onnotice: () => {} });
      try {
        await sql.unsafe(`drop database if exists ${name} with (force)`);
      } finally {
        await sql.end();
      }
    },
  };
}

/**
 * The back-ends as a server process is configured for them: each call of a target's function
 * makes a fresh embedded data dir or a fresh Postgres database and returns the env naming it.
 * `cleanup` removes everything made.
 */
export function serverDatabases(): {
  targets: [Backend, () => Promise<Record<string, string>>][];
  cleanup(): Promise<void>;
} {
  const made: (() => Promise<void>)[] = [];
  const targets: [Backend, () => Promise<Record<string, string>>][] = [
    [
      "pglite",
      async () => {
        const dir = mkdtempSync(join(tmpdir(), "agent-bridge-data-"));
        made.push(async () => rmSync(dir, { recursive: true, force: true }));
        // From an empty cluster's copy: initdb on every start cost these tests most of their time.
        await seedDataDir(dir);
        return { AGENT_BRIDGE_DATA_DIR: dir };
      },
    ],
  ];
  if (serverUrl) {
    targets.push([
      "postgres",
      async () => {
        const { url, drop } = await createServerDatabase();
        made.push(drop);
        return { DATABASE_URL: url };
      },
    ]);
  }
  return {
    targets,
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
