import { randomBytes } from "node:crypto";
import postgres from "postgres";
import { inject } from "vitest";
import { openDatabase } from "../../src/store/db.js";
import { emptyingStatement, RELATIONS_QUERY, type Relation, SHAPE_QUERY } from "./emptying.js";
import { migrationsDigest } from "./pglite-template.js";

// The test databases on the Postgres server of TEST_DATABASE_URL. A migrated one is a copy of a
// migrated template database made once per run: running every migration cost each new database
// 150 ms, most of it the server's CPU. Copying the template still cost the server about 0.4 s of
// CPU (writing and syncing the copy), so a test process lends its migrated databases again once
// emptied, which costs a tenth of that (docs/development.md). A database given back is closed to
// connections, its sessions ended, and renamed before it is emptied: whatever still holds its old
// URL (a server a test left running, a pool it did not close) reaches nothing, as after a drop.
// One whose schema a caller changed, or that would not close, is dropped instead.

const serverUrl = process.env.TEST_DATABASE_URL;

/** Runs `work` over one connection to `url` (a server, or a database on it), closed after. */
export async function onServer<T>(
  url: string,
  work: (admin: postgres.Sql) => Promise<T>,
): Promise<T> {
  const admin = postgres(url, { max: 1, onnotice: () => {} });
  try {
    return await work(admin);
  } finally {
    await admin.end();
  }
}

function databaseUrl(server: string, name: string): string {
  const url = new URL(server);
  url.pathname = `/${name}`;
  return url.toString();
}

/** Creates a database on the Postgres server at `server`, a copy of `template` if named; returns its URL. */
export async function createDatabaseOn(
  server: string,
  name: string,
  template?: string,
): Promise<string> {
  await onServer(server, (admin) =>
    admin.unsafe(`create database ${name}${template ? ` template ${template}` : ""}`),
  );
  return databaseUrl(server, name);
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

/** A new test run's id: when it started (Unix seconds, hex), and a random part. */
export function newRunId(): string {
  return `${Math.floor(Date.now() / 1000).toString(16)}_${randomBytes(3).toString("hex")}`;
}

const TEST_DATABASE = /^agent_bridge_test_([0-9a-f]+)_[0-9a-f]+_[0-9a-f]+$/;
/** Longer than any run lasts: a run that started this long ago was killed before its end. */
const ABANDONED_AFTER_S = 3 * 3600;

/** Drops each test database matching `doomed`; tries every one, then fails if any failed. */
async function dropTestDatabases(doomed: (name: string) => boolean): Promise<void> {
  const url = serverUrl;
  if (!url) return;
  await onServer(url, async (admin) => {
    const names = (await admin<{ datname: string }[]>`select datname from pg_database`)
      .map((row) => row.datname)
      .filter((name) => TEST_DATABASE.test(name) && doomed(name));
    const failed: unknown[] = [];
    for (const name of names) {
      await admin.unsafe(`drop database ${name} with (force)`).catch((err) => failed.push(err));
    }
    if (failed.length > 0) throw new AggregateError(failed, "could not drop every test database");
  });
}

/** Drops the test databases of the run `run` that are still there (lent ones kept for reuse). */
export function dropRunDatabases(run: string): Promise<void> {
  return dropTestDatabases((name) => name.startsWith(`agent_bridge_test_${run}_`));
}

/** Drops what runs that were killed before their end left on the server. */
export function dropAbandonedDatabases(): Promise<void> {
  const now = Date.now() / 1000;
  return dropTestDatabases(
    (name) => now - Number.parseInt(TEST_DATABASE.exec(name)?.[1] ?? "", 16) > ABANDONED_AFTER_S,
  );
}

function newName(): string {
  return `agent_bridge_test_${inject("testRun")}_${randomBytes(6).toString("hex")}`;
}

/** Migrated databases of this test process, emptied, waiting for a caller; more are dropped. */
const idle: string[] = [];
const MAX_IDLE = 3;
/**
 * A migrated database's schema and the statement that empties one (./emptying.ts), read from this
 * process's first copy: every copy is of the same template.
 */
let migrated: Promise<{ shape: string; emptying: string }> | undefined;

/** Runs `work` on a connection of its own to the database `name`. */
function inDatabase<T>(server: string, name: string, work: (db: postgres.Sql) => Promise<T>) {
  return onServer(databaseUrl(server, name), work);
}

async function shapeOf(db: postgres.Sql): Promise<string> {
  const [row] = await db.unsafe<{ shape: string }[]>(SHAPE_QUERY);
  return row?.shape ?? "";
}

async function dropDatabase(server: string, name: string): Promise<void> {
  await onServer(server, (admin) => admin.unsafe(`drop database if exists ${name} with (force)`));
}

/** Ends every session on `name` and renames it `next`; false if a session would not end. */
async function closeAndRename(server: string, name: string, next: string): Promise<boolean> {
  return onServer(server, async (admin) => {
    await admin.unsafe(`alter database ${name} allow_connections false`);
    await admin`select pg_terminate_backend(pid, 5000) from pg_stat_activity where datname = ${name}`;
    try {
      await admin.unsafe(`alter database ${name} rename to ${next}`);
    } catch {
      return false;
    }
    await admin.unsafe(`alter database ${next} allow_connections true`);
    return true;
  });
}

/** Takes back a lent database: kept for the next caller, emptied, or dropped. */
async function giveBack(server: string, name: string): Promise<void> {
  const next = newName();
  if (!(await closeAndRename(server, name, next).catch(() => false))) {
    // Under either name, whichever step failed.
    await dropDatabase(server, name);
    return dropDatabase(server, next);
  }
  // Not known only if this process's last read of it failed: the database is dropped then.
  const known = await migrated?.catch(() => undefined);
  const kept =
    known !== undefined &&
    (await inDatabase(server, next, async (db) => {
      await db.unsafe(known.emptying);
      return (await shapeOf(db)) === known.shape;
    }).catch(() => false));
  if (kept && idle.length < MAX_IDLE) idle.push(next);
  else await dropDatabase(server, next);
}

async function lendMigrated(server: string): Promise<string> {
  const lent = idle.pop();
  if (lent) return lent;
  const name = newName();
  await createDatabaseOn(server, name, migratedTemplate);
  migrated ??= inDatabase(server, name, async (db) => ({
    shape: await shapeOf(db),
    emptying: emptyingStatement(await db.unsafe<Relation[]>(RELATIONS_QUERY)),
  })).catch((err) => {
    // The next copy reads them again.
    migrated = undefined;
    throw err;
  });
  await migrated;
  return name;
}

/**
 * A database on the TEST_DATABASE_URL server, private to the caller until it calls `drop`: empty,
 * as an operator's new database is, or with every migration run (`migrated`), as the server
 * leaves it at its first start.
 */
export async function createServerDatabase(
  options: { migrated?: boolean } = {},
): Promise<{ url: string; drop: () => Promise<void> }> {
  const server = serverUrl;
  if (!server) throw new Error("TEST_DATABASE_URL is not set");
  if (options.migrated) {
    const name = await lendMigrated(server);
    let returned: Promise<void> | undefined;
    return {
      url: databaseUrl(server, name),
      drop: () => {
        returned ??= giveBack(server, name);
        return returned;
      },
    };
  }
  const name = newName();
  return {
    url: await createDatabaseOn(server, name),
    drop: () => dropDatabase(server, name),
  };
}
