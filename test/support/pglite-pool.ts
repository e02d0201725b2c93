import { mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { PGlite } from "@electric-sql/pglite";
import { sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/pglite";
import { inject } from "vitest";
import { type Database, type DatabaseHandle, openDatabase } from "../../src/store/db.js";
import * as schema from "../../src/store/schema.js";
import { seedDataDir } from "./pglite-template.js";

// The embedded test databases of this test process, kept open and emptied between callers:
// copying a data dir, opening it, closing it and removing it cost about 0.2 s of CPU, and a run
// opens about ninety; emptying one costs a quarter of that (README "Development"). A caller gets
// a view of its own: once it closes that view, every statement through it fails as a closed
// PGlite's does, so that nothing a test left running reaches the next caller's data. A database
// whose schema a test changed (a trigger, a function) is closed instead of kept.

interface Open {
  handle: DatabaseHandle;
  client: PGlite;
  dir: string;
  /** Its tables, as migrated: what is emptied between callers. */
  tables: string;
  /** The schema as migrated, to tell whether a caller changed it. */
  shape: string;
}

/** Open, empty databases waiting for a caller; more than this many are closed. */
const idle: Open[] = [];
const MAX_IDLE = 3;

const tables = sql`select string_agg(format('%I.%I', schemaname, tablename), ', ')
  from pg_tables where schemaname = 'public'`;

/** What a test could add or change of the schema, counted. */
const shape = sql`select concat_ws(',',
  (select count(*) from pg_trigger where not tgisinternal),
  (select count(*) from pg_proc p join pg_namespace n on n.oid = p.pronamespace where n.nspname = 'public'),
  (select count(*) from pg_class c join pg_namespace n on n.oid = c.relnamespace where n.nspname not in ('pg_catalog', 'information_schema', 'pg_toast')),
  (select count(*) from pg_attribute a join pg_class c on c.oid = a.attrelid join pg_namespace n on n.oid = c.relnamespace
     where n.nspname = 'public' and a.attnum > 0 and not a.attisdropped),
  (select count(*) from pg_roles),
  (select count(*) from drizzle.__drizzle_migrations)) as shape`;

async function scalar(db: Database, query: ReturnType<typeof sql>): Promise<string> {
  const { rows } = (await db.execute(query)) as unknown as { rows: Record<string, string>[] };
  return String(Object.values(rows[0] ?? {})[0]);
}

async function openNew(): Promise<Open> {
  const dir = mkdtempSync(join(inject("testDataDirs"), "db-"));
  await seedDataDir(dir);
  const handle = await openDatabase({ kind: "pglite", dataDir: dir });
  const client = (handle.db as unknown as { $client: PGlite }).$client;
  return {
    handle,
    client,
    dir,
    tables: await scalar(handle.db, tables),
    shape: await scalar(handle.db, shape),
  };
}

async function discard(open: Open): Promise<void> {
  await open.handle.close().catch(() => {});
  rmSync(open.dir, { recursive: true, force: true });
}

/** Empties the database for the next caller, or closes it if its schema is not as migrated. */
async function giveBack(open: Open): Promise<void> {
  try {
    const db = open.handle.db;
    // Session state too: settings, advisory locks, prepared statements.
    await db.execute(sql`discard all`);
    await db.execute(sql.raw(`truncate ${open.tables} restart identity cascade`));
    if ((await scalar(db, shape)) === open.shape && idle.length < MAX_IDLE) {
      idle.push(open);
      return;
    }
  } catch {
    // A database the caller broke is not lent again.
  }
  await discard(open);
}

/** A new, empty, migrated embedded database, private to the caller until it closes it. */
export async function lendPglite(): Promise<DatabaseHandle> {
  const open = idle.pop() ?? (await openNew());
  let closed = false;
  const client = new Proxy(open.client, {
    get(target, property) {
      if (closed) {
        if (property === "closed") return true;
        throw new Error("PGlite is closed");
      }
      const value = Reflect.get(target, property, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  const db = drizzle({ client, schema }) as unknown as Database;
  let returned: Promise<void> | undefined;
  return {
    db,
    kind: "pglite",
    ping: async () => {
      await db.execute(sql`select 1`);
    },
    close: () => {
      closed = true;
      returned ??= giveBack(open);
      return returned;
    },
  };
}
