import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { PGlite, type QueryOptions, type Results, type Transaction } from "@electric-sql/pglite";
import { sql } from "drizzle-orm";
import type { PgDatabase, PgQueryResultHKT } from "drizzle-orm/pg-core";
import { drizzle as drizzlePglite } from "drizzle-orm/pglite";
import { migrate as migratePglite } from "drizzle-orm/pglite/migrator";
import { drizzle as drizzlePostgres } from "drizzle-orm/postgres-js";
import { migrate as migratePostgres } from "drizzle-orm/postgres-js/migrator";
import postgres from "postgres";
import * as schema from "./schema.js";

/** One type for both back-ends: queries are written once against it. */
export type Database = PgDatabase<PgQueryResultHKT, typeof schema>;

export type DatabaseTarget =
  /** Embedded PGlite; `dataDir` unset keeps it in memory (tests). */
  { kind: "pglite"; dataDir?: string } | { kind: "postgres"; url: string };

export interface DatabaseHandle {
  db: Database;
  kind: DatabaseTarget["kind"];
  /** Throws when the database cannot answer. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

export class DatabaseLockedError extends Error {}

/**
 * The embedded database is one process's: a second one on the same files would corrupt them.
 * A lock file holds the owner's pid; a lock whose process is gone is stale and taken over.
 */
function lockDataDir(dir: string): () => void {
  const lock = path.join(dir, "pglite.lock");
  try {
    writeFileSync(lock, String(process.pid), { flag: "wx" });
  } catch {
    const owner = Number(readFileSync(lock, "utf8"));
    if (owner && owner !== process.pid && processExists(owner)) {
      throw new DatabaseLockedError(
        `the embedded database in ${dir} is in use by process ${owner} (a running server?); stop it, or use the server's API`,
      );
    }
    writeFileSync(lock, String(process.pid));
  }
  return () => rmSync(lock, { force: true });
}

function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * PGlite runs in this thread, and its statements resolve as microtasks: a chain of them (a
 * request's lookups, a run's completion) ran to its end before any `process.nextTick` callback.
 * Node corks an HTTP response's writes until the next tick, so SSE frames already sent waited
 * behind unrelated statements: 5 ms for a run's first text delta (`npm run bench -- --only
 * first`). Each statement, and each transaction as a whole, therefore waits for the ticks already
 * queued before it starts.
 */
class TickYieldingPGlite extends PGlite {
  override async query<T>(query: string, params?: unknown[], options?: QueryOptions) {
    await afterQueuedTicks();
    return super.query<T>(query, params, options) as Promise<Results<T>>;
  }

  override async transaction<T>(callback: (tx: Transaction) => Promise<T>): Promise<T> {
    await afterQueuedTicks();
    return super.transaction(callback);
  }
}

const afterQueuedTicks = () => new Promise<void>((resolve) => process.nextTick(resolve));

const migrationsFolder = fileURLToPath(new URL("../../drizzle", import.meta.url));

/** Opens the database and brings its schema up to date with the committed migrations. */
export async function openDatabase(target: DatabaseTarget): Promise<DatabaseHandle> {
  if (target.kind === "pglite") {
    let dataDir: string | undefined;
    let unlock = () => {};
    if (target.dataDir) {
      dataDir = path.join(target.dataDir, "pgdata");
      mkdirSync(dataDir, { recursive: true });
      unlock = lockDataDir(target.dataDir);
    }
    try {
      const client = new TickYieldingPGlite(dataDir);
      const db = drizzlePglite({ client, schema });
      await migratePglite(db, { migrationsFolder });
      return handle(db, "pglite", async () => {
        await client.close();
        unlock();
      });
    } catch (err) {
      unlock();
      throw err;
    }
  }
  // `onnotice` silenced: migrations' "relation already exists, skipping" notices are noise.
  const client = postgres(target.url, { max: 10, onnotice: () => {} });
  const db = drizzlePostgres({ client, schema });
  try {
    await migratePostgres(db, { migrationsFolder });
  } catch (err) {
    await client.end({ timeout: 1 });
    throw err;
  }
  return handle(db, "postgres", () => client.end({ timeout: 5 }));
}

function handle(
  db: Database,
  kind: DatabaseTarget["kind"],
  close: () => Promise<void>,
): DatabaseHandle {
  let closed: Promise<void> | undefined;
  return {
    db,
    kind,
    ping: async () => {
      await db.execute(sql`select 1`);
    },
    close: () => {
      closed ??= close();
      return closed;
    },
  };
}
