import { spawn } from "node:child_process";
import { once } from "node:events";
import { accessSync, chmodSync, constants, existsSync, mkdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { setFlagsFromString } from "node:v8";
import { PGlite, types } from "@electric-sql/pglite";
import { type Column, fillPlaceholders, is, type Query, SQL, sql } from "drizzle-orm";
import { type PgDatabase, PgDialect, type PgQueryResultHKT } from "drizzle-orm/pg-core";
import { drizzle as drizzlePglite } from "drizzle-orm/pglite";
import { migrate as migratePglite } from "drizzle-orm/pglite/migrator";
import { drizzle as drizzlePostgres } from "drizzle-orm/postgres-js";
import { migrate as migratePostgres } from "drizzle-orm/postgres-js/migrator";
import postgres from "postgres";
import { type DataDirLock, lockDataDir } from "./data-dir-lock.js";
import { TickYieldingPGlite } from "./pglite-client.js";
import * as schema from "./schema.js";

/** One type for both back-ends: queries are written once against it. */
export type Database = PgDatabase<PgQueryResultHKT, typeof schema>;

export type DatabaseTarget =
  /** Embedded PGlite; `dataDir` unset keeps it in memory (tests). */
  | { kind: "pglite"; dataDir?: string }
  /**
   * `poolSize`: connections besides the LISTEN one and the event logs' (10 unless set).
   * `outageBoundMs`: how long writes ride out an outage (retry.ts); a connection attempt gets a
   * third of it (see connectTimeoutSeconds).
   */
  | { kind: "postgres"; url: string; poolSize?: number; outageBoundMs?: number };

/**
 * Runs `read` in one snapshot: its statements all see the database as of one moment. Apart, each
 * statement sees what committed before it: a run's row read as running, then its callback read
 * as delivered once the run had finished in between.
 */
export function inOneSnapshot<T>(db: Database, read: (tx: Database) => Promise<T>): Promise<T> {
  return db.transaction(read, { isolationLevel: "repeatable read", accessMode: "read only" });
}

/** postgres.js `sql.listen`: `onListen` is called on each (re)connect of its connection. */
export type Listen = (
  channel: string,
  onNotify: (payload: string) => void,
  onListen: () => void,
) => Promise<void>;

export interface DatabaseHandle {
  db: Database;
  /**
   * Where the runs' event logs are written: on Postgres a connection of its own, so that a burst
   * of requests holding the pool (fifty runs admitted at once, each transaction waiting for its
   * key's lock) never keeps the running runs' events from their clients; the embedded database's
   * one connection otherwise.
   */
  eventsDb: Database;
  kind: DatabaseTarget["kind"];
  /** Throws when the database cannot answer. */
  ping(): Promise<void>;
  /**
   * LISTEN on the channel: on Postgres over one dedicated connection, re-listening after it
   * reconnects; `onListen` is called on each (re)connect. The embedded database listens on its
   * one connection.
   */
  listen?: Listen;
  close(): Promise<void>;
}

/**
 * The database could not be opened; the message says what is wrong and what to do, in one line
 * and without the URL's password, for the operator (the entry point prints it as it is).
 */
export class DatabaseOpenError extends Error {
  constructor(
    readonly code: "data_dir_unusable" | "database_unreachable" | "migration_failed",
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/**
 * The embedded server's settings beyond PGlite's own, each an upper bound on memory. All of it
 * lives in PGlite's WebAssembly memory, which never shrinks: what a setting lets the server touch
 * once stays resident for the life of the process. At rest they change nothing measurable (the
 * server has touched little); they cap the high-water mark under load.
 */
const pgliteOptions = {
  startParams: [
    ...PGlite.defaultStartParams,
    // The page cache: 16 MB instead of initdb's 128 MB keeps about 90 MB less resident for a
    // database this service's size, whose files the OS caches anyway.
    ...["-c", "shared_buffers=16MB"],
    // WAL written before a commit flushes it: the default (1/32 of shared_buffers, 512 kB) said
    // outright, as a run's events are written in batches far below it.
    ...["-c", "wal_buffers=512kB"],
    // Per sort or hash of a query: the default, 4 MB, said outright. The service's queries mostly
    // read in index order; less would send a bigger sort or hash to temp files, for a bound that
    // is small already.
    ...["-c", "work_mem=4MB"],
    // CREATE INDEX in a migration, VACUUM: 64 MB by default, resident after the first migration
    // that builds an index over a big table; 16 MB builds it in more passes.
    ...["-c", "maintenance_work_mem=16MB"],
    // Temporary tables' cache: the service makes none.
    ...["-c", "temp_buffers=1MB"],
  ],
  // The WebAssembly memory's start: 128 MB, the least the module accepts (a smaller one fails to
  // link); only the pages the server touches are resident.
  initialMemory: 128 * 1024 * 1024,
  // PGlite's type has a serializer return a string; its bind sends bytes it is given as such.
  serializers: { [types.TEXT]: textParameter as (value: unknown) => string },
};

/** Text parameters from this length on go to PGlite as bytes (textParameter). */
const BYTES_FROM_CHARS = 4096;
// PGlite has a serializer for every type it knows, text first of all.
const serializeText = types.serializers[types.TEXT] as (value: unknown) => string;

/**
 * A long text parameter (a run's batch of events above all) goes to PGlite as its UTF-8 bytes, in
 * the binary format, which for text is those same bytes: PGlite's own encoding of a string
 * measures its UTF-8 length in a JavaScript loop, twice, on the server's thread (a 1.2 MB batch
 * stored in 14 ms rather than 20).
 */
function textParameter(value: unknown): string | Uint8Array {
  if (typeof value === "string" && value.length >= BYTES_FROM_CHARS) return Buffer.from(value);
  return serializeText(value);
}

const migrationsFolder = fileURLToPath(new URL("../../drizzle", import.meta.url));

const dialect = new PgDialect();

/** A statement to run: Drizzle's SQL, or the text and parameters of one built once (statementOnce). */
export type Statement = SQL | Query;

const queryOf = (statement: Statement): Query =>
  is(statement, SQL) ? dialect.sqlToQuery(statement) : statement;

/**
 * A statement whose text is made once, what varies in it a placeholder (`sql.placeholder`): it
 * gives the statement with the placeholders' values, to run on whichever handle (a transaction's
 * too, where a Drizzle `prepare` is made again for each). For the statements every run makes,
 * whose building took more of the thread than their run.
 */
export function statementOnce(build: () => SQL): (values: Record<string, unknown>) => Query {
  let made: Query | undefined;
  return (values) => {
    made ??= dialect.sqlToQuery(build());
    return { sql: made.sql, params: fillPlaceholders(made.params, values) };
  };
}

/**
 * Runs one of the statements each run makes, prepared on its connection. postgres.js sends a
 * statement with parameters that is not prepared as two round trips (it asks the server for their
 * types first) and a prepared one, once its connection has it, as one. Only for SQL of a few
 * texts, none built from data (a list's length, say): each is kept prepared on each connection for
 * the connection's life. Drizzle's queries have their `prepare(name)` for the same.
 */
export function executePrepared(db: Database, statement: Statement): Promise<unknown> {
  return db._.session.prepareQuery(queryOf(statement), undefined, "", false).execute();
}

/**
 * Runs `statements` in a transaction of their own, in turn, and resolves with what each returned.
 * On Postgres the transaction takes one round trip, not one per statement and two more: `begin`,
 * the statements (prepared) and `commit` go out together on one connection. So only for
 * statements that need nothing of each other's answers, in a transaction that commits whatever
 * they return: one that fails leaves the transaction aborted, whose `commit` then rolls it back,
 * and the first failure is thrown. The embedded database, in the process, runs them in turn.
 */
export function inOneRoundTrip(db: Database, statements: Statement[]): Promise<unknown[]> {
  return inRoundTrips(db, statements);
}

/**
 * Runs a transaction of two steps, each one round trip on Postgres: `begin` with the `first`
 * statements; then the statements `then` makes of their answers, with `commit`. Resolves with
 * the `value` that `then` gave. A failed statement, or `then` throwing, rolls it all back and
 * throws. The embedded database runs them in turn, in a transaction.
 */
export async function inTwoRoundTrips<T>(
  db: Database,
  first: Statement[],
  then: (answers: unknown[]) => { statements: Statement[]; value: T },
): Promise<T> {
  let value: T | undefined;
  await inRoundTrips(db, first, (answers) => {
    const step = then(answers);
    value = step.value;
    return step.statements;
  });
  return value as T;
}

/** inOneRoundTrip, or with `then` inTwoRoundTrips; resolves with the last step's answers. */
async function inRoundTrips(
  db: Database,
  first: Statement[],
  then?: (answers: unknown[]) => Statement[],
): Promise<unknown[]> {
  const client = (db as unknown as { $client: unknown }).$client;
  if (!isPostgresClient(client)) {
    return db.transaction(async (tx) => {
      const inTurn = async (statements: Statement[]) => {
        const answers: unknown[] = [];
        for (const statement of statements) answers.push(await executePrepared(tx, statement));
        return answers;
      };
      const answers = await inTurn(first);
      return then ? inTurn(then(answers)) : answers;
    });
  }
  const connection = await client.reserve();
  // Each is sent as it is awaited, in this order; all are settled before any answer is read.
  const send = async (queries: Query[], around: [string[], string[]]) => {
    const sent = await Promise.allSettled([
      ...around[0].map((command) => connection.unsafe(command)),
      ...queries.map(({ sql: text, params }) =>
        connection.unsafe(text, params as postgres.ParameterOrJSON<never>[], { prepare: true }),
      ),
      ...around[1].map((command) => connection.unsafe(command)),
    ]);
    const failed = sent.find((result) => result.status === "rejected");
    if (failed) throw failed.reason;
    const answers = sent.map((result) => (result as PromiseFulfilledResult<unknown>).value);
    return answers.slice(around[0].length, answers.length - around[1].length);
  };
  try {
    if (!then) return await send(first.map(queryOf), [["begin"], ["commit"]]);
    let next: Query[];
    try {
      next = then(await send(first.map(queryOf), [["begin"], []])).map(queryOf);
    } catch (err) {
      // Whatever failed before the second step went out: the connection goes back to the pool
      // out of the transaction (a lost one is dropped there).
      await connection.unsafe("rollback").catch(() => {});
      throw err;
    }
    return await send(next, [[], ["commit"]]);
  } finally {
    connection.release();
  }
}

function isPostgresClient(client: unknown): client is postgres.Sql {
  return typeof (client as Partial<postgres.Sql>).reserve === "function";
}

/** The rows a raw statement returned: postgres.js gives an array, PGlite `{rows}`. */
export function returnedRows<T>(result: unknown): T[] {
  return (Array.isArray(result) ? result : (result as { rows: T[] }).rows) as T[];
}

/**
 * A raw statement's row as a Drizzle select of `columns` gives it: each column's value read as
 * its type reads it (dates, JSON, numbers), null as null.
 */
export function rowOf(columns: Record<string, Column>, raw: Record<string, unknown>) {
  return Object.fromEntries(
    Object.entries(columns).map(([key, column]) => {
      const value = raw[column.name];
      return [key, value === null || value === undefined ? null : column.mapFromDriverValue(value)];
    }),
  );
}

/** Opens the database and brings its schema up to date with the committed migrations. */
export function openDatabase(target: DatabaseTarget): Promise<DatabaseHandle> {
  return target.kind === "pglite"
    ? openPglite(target.dataDir)
    : openPostgres(target.url, target.poolSize, target.outageBoundMs);
}

async function openPglite(dir: string | undefined): Promise<DatabaseHandle> {
  let dataDir: string | undefined;
  let lock: DataDirLock | undefined;
  if (dir) {
    dataDir = path.join(dir, "pgdata");
    try {
      mkdirSync(dataDir, { recursive: true });
      // The database's files are the server's alone, as Postgres requires of its own data dir;
      // an agent running as another user must not read them.
      chmodSync(dataDir, 0o700);
      accessSync(dataDir, constants.W_OK);
    } catch (err) {
      throw new DatabaseOpenError(
        "data_dir_unusable",
        `cannot use ${dir} as the data directory (${errnoText(err)}); make it a directory this user can write to, or set AGENT_BRIDGE_DATA_DIR to one`,
        { cause: err },
      );
    }
    lock = await lockDataDir(dir);
  }
  let client: TickYieldingPGlite | undefined;
  try {
    try {
      if (dataDir && !existsSync(path.join(dataDir, "PG_VERSION")))
        await initializeDataDir(dataDir);
      // One background thread compiles PGlite's hot functions optimized, not V8's default of one
      // per core: each thread's compiler memory, freed, stayed in a C-allocator pool of its own,
      // about 25 MB of RSS at rest. The code is the same, only its tier-up is serial.
      setFlagsFromString("--wasm-num-compilation-tasks=1");
      client = new TickYieldingPGlite(dataDir, pgliteOptions);
      await client.waitReady;
      client.keepDrizzleText();
    } catch (err) {
      throw new DatabaseOpenError(
        "data_dir_unusable",
        `the embedded database in ${dataDir} cannot be opened (${oneLine(err)}); restore it from a backup, or move it aside to start with an empty one`,
        { cause: err },
      );
    }
    const db = drizzlePglite({ client, schema });
    const opened = client;
    await migrateOrExplain(() => migratePglite(db, { migrationsFolder }));
    return {
      ...handle(db, "pglite", async () => {
        await opened.close();
        await lock?.release();
      }),
      listen: pgliteListen(opened),
    };
  } catch (err) {
    if (client && !client.closed) await client.close().catch(() => {});
    await lock?.release();
    throw err;
  }
}

/**
 * LISTEN on the embedded database: its one connection hears the NOTIFY of its own transactions,
 * at their commit (the live feed's doorbell in one process).
 */
function pgliteListen(client: PGlite): Listen {
  return async (channel, onNotify, onListen) => {
    await client.listen(channel, onNotify);
    onListen();
  };
}

/**
 * Runs initdb in a process of its own. In this process it would leave about 400 MB resident for
 * as long as the process lives (its WebAssembly memory is freed only by a garbage collection,
 * which an idle server does not run). A worker thread was not enough: the memory its compiles and
 * PGlite allocated natively stayed in the C allocator's per-thread pools after it exited, about
 * 115 MB of the server's RSS at rest; a process's memory all goes with the process.
 */
async function initializeDataDir(dataDir: string): Promise<void> {
  const script = fileURLToPath(new URL("./pglite-initdb.mjs", import.meta.url));
  // This process's WebAssembly compiler flags (the tests' --liftoff-only), not its others (a
  // profiler's, a preloaded module).
  const wasmFlags = process.execArgv.filter((flag) => /^--(liftoff|wasm)/.test(flag));
  const child = spawn(process.execPath, [...wasmFlags, script, dataDir], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (d: Buffer) => {
    stderr += d;
  });
  const [code] = await once(child, "close");
  if (code !== 0) throw new Error(stderr.trim() || `initdb exited with code ${code}`);
}

/**
 * How long a connection of the pool waits before it connects again, in seconds, after `failures`
 * failed connects in a row across the pool. postgres.js's default grows to 20 s after about eight,
 * which a database outage of a few seconds reaches at once (every connection of the pool fails):
 * statements asked for once the database was back then waited up to 20 s for their connection,
 * holding a run's events and a shutdown. Statements that must ride out an outage are paced by
 * their own retries (retry.ts), so reconnecting needs only a short, jittered pause.
 */
const reconnectDelaySeconds = (failures: number) =>
  Math.min(0.05 * 2 ** failures, 1) * (0.5 + Math.random() / 2);

/**
 * How long a connection attempt may wait for the server's first ReadyForQuery: a third of the
 * outage bound, between 1 and 10 s. postgres.js's default, 30 s, equals the default bound: a
 * server that accepted the connection and then hung (mid-restart, starved) spent the whole
 * bound on one attempt, and a write failed after an outage of a few seconds. Now at least
 * three attempts fit in the bound.
 */
export const connectTimeoutSeconds = (outageBoundMs: number) =>
  Math.min(Math.max(outageBoundMs / 3000, 1), 10);

async function openPostgres(
  url: string,
  poolSize = 10,
  outageBoundMs = 30_000,
): Promise<DatabaseHandle> {
  // `onnotice` silenced: migrations' "relation already exists, skipping" notices are noise.
  // `fetch_types` off: postgres.js looks up the array types first on each new connection, and
  // drops that query's promise, so a connection lost during it (a database outage, a restart)
  // rejects where no caller can catch it (porsager/postgres#1192, #1223). No statement here takes
  // or returns a driver array (events.ts sends array literals as text).
  const options = {
    fetch_types: false,
    onnotice: () => {},
    backoff: reconnectDelaySeconds,
    connect_timeout: connectTimeoutSeconds(outageBoundMs),
  };
  const client = postgres(url, { ...options, max: poolSize });
  // The event logs' writer has one statement in flight at a time.
  const eventsClient = postgres(url, { ...options, max: 1 });
  const close = async () => {
    await Promise.all([client.end({ timeout: 5 }), eventsClient.end({ timeout: 5 })]);
  };
  try {
    // Asked first, so that a server that cannot be reached is told apart from a failed migration;
    // on both clients, so that a server with no connection left for the event logs' says so now,
    // not at the first run.
    try {
      await Promise.all([client`select 1`, eventsClient`select 1`]);
    } catch (err) {
      throw new DatabaseOpenError(
        "database_unreachable",
        `cannot connect to the Postgres server at ${serverName(url)} (${errnoText(err)}); check that it is running and that DATABASE_URL is right`,
        { cause: err },
      );
    }
    const db = drizzlePostgres({ client, schema });
    await migrateOrExplain(() =>
      oneAtATime(client, () => migratePostgres(db, { migrationsFolder })),
    );
    const listen: Listen = async (channel, onNotify, onListen) => {
      await client.listen(channel, onNotify, onListen);
    };
    const eventsDb = drizzlePostgres({ client: eventsClient, schema });
    return { ...handle(db, "postgres", close, eventsDb), listen };
  } catch (err) {
    await Promise.all([client.end({ timeout: 1 }), eventsClient.end({ timeout: 1 })]);
    throw err;
  }
}

/** Any number, the same for every instance: the key of the migrations' advisory lock. */
const MIGRATIONS_LOCK = 0x61_67_62_72; // "agbr"

/**
 * Runs `migrate` while holding the migrations' lock, on a connection of its own: instances that
 * start together on a new database wait for the first to create the schema, then find it made.
 */
async function oneAtATime(client: postgres.Sql, migrate: () => Promise<void>): Promise<void> {
  const lock = await client.reserve();
  try {
    await lock`select pg_advisory_lock(${MIGRATIONS_LOCK})`;
    try {
      await migrate();
    } finally {
      await lock`select pg_advisory_unlock(${MIGRATIONS_LOCK})`;
    }
  } finally {
    lock.release();
  }
}

async function migrateOrExplain(migrate: () => Promise<void>): Promise<void> {
  try {
    await migrate();
  } catch (err) {
    // Drizzle wraps the database's own error, whose message is the one that says what is wrong.
    const cause = (err as { cause?: unknown }).cause ?? err;
    throw new DatabaseOpenError(
      "migration_failed",
      `the database's schema cannot be brought up to date (${oneLine(cause)}); it holds tables this version of agent-bridge did not make: use an empty database, or restore a backup`,
      { cause: err },
    );
  }
}

/** Host, port and database of a Postgres URL: never its password or parameters. */
function serverName(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname || "localhost"}:${u.port || 5432}${u.pathname}`;
  } catch {
    return "DATABASE_URL";
  }
}

const ERRNO_TEXT: Record<string, string> = {
  EACCES: "permission denied",
  EROFS: "read-only file system",
  ENOTDIR: "not a directory",
  EEXIST: "a file of that name exists",
  ECONNREFUSED: "connection refused",
  ENOTFOUND: "unknown host",
  EAI_AGAIN: "unknown host",
  ETIMEDOUT: "timed out",
  CONNECT_TIMEOUT: "timed out",
  EHOSTUNREACH: "host unreachable",
};

/** An error as a short phrase: the system's words for a known errno, else its message. */
function errnoText(err: unknown): string {
  const code = (err as { code?: unknown }).code;
  return (typeof code === "string" && ERRNO_TEXT[code]) || oneLine(err);
}

const oneLine = (err: unknown) =>
  (err instanceof Error ? err.message : String(err)).replace(/\s+/g, " ").trim();

function handle(
  db: Database,
  kind: DatabaseTarget["kind"],
  close: () => Promise<void>,
  eventsDb = db,
): DatabaseHandle {
  let closed: Promise<void> | undefined;
  return {
    db,
    eventsDb,
    kind,
    ping: async () => {
      await Promise.all(
        [db, ...(eventsDb === db ? [] : [eventsDb])].map((d) => d.execute(sql`select 1`)),
      );
    },
    close: () => {
      closed ??= close();
      return closed;
    },
  };
}
