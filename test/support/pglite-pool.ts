import { mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { PGlite } from "@electric-sql/pglite";
import { sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/pglite";
import { inject } from "vitest";
import { type Database, type DatabaseHandle, openDatabase } from "../../src/store/db.js";
import * as schema from "../../src/store/schema.js";
import { emptyingStatement, RELATIONS_QUERY, type Relation, SHAPE_QUERY } from "./emptying.js";
import { seedDataDir } from "./pglite-template.js";

// The embedded test databases of this test process, kept open and emptied between callers:
// copying a data dir, opening it, closing it and removing it cost about 0.2 s of CPU, and a run
// opens about ninety; emptying one (./emptying.ts) costs a fraction of that (docs/development.md). A caller gets
// a view of its own: once it closes that view, every statement through it fails as a closed
// PGlite's does, so that nothing a test left running reaches the next caller's data. A database
// whose schema a test changed (a trigger, a function) is closed instead of kept.

interface Open {
  handle: DatabaseHandle;
  client: PGlite;
  dir: string;
  /** The statement that empties it between callers. */
  emptying: string;
  /** The schema as migrated, to tell whether a caller changed it. */
  shape: string;
}

/** Open, empty databases waiting for a caller; more than this many are closed. */
const idle: Open[] = [];
const MAX_IDLE = 3;

async function rows<T>(db: Database, query: string): Promise<T[]> {
  return ((await db.execute(sql.raw(query))) as unknown as { rows: T[] }).rows;
}

async function shapeOf(db: Database): Promise<string> {
  return (await rows<{ shape: string }>(db, SHAPE_QUERY))[0]?.shape ?? "";
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
    emptying: emptyingStatement(await rows<Relation>(handle.db, RELATIONS_QUERY)),
    shape: await shapeOf(handle.db),
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
    await db.execute(sql.raw(open.emptying));
    if ((await shapeOf(db)) === open.shape && idle.length < MAX_IDLE) {
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
  // What the caller listens to stops with its view: the next caller's notifications are its own.
  const unlistens: (() => Promise<void>)[] = [];
  return {
    db,
    eventsDb: db,
    kind: "pglite",
    ping: async () => {
      await db.execute(sql`select 1`);
    },
    listen: async (channel, onNotify, onListen) => {
      unlistens.push(await open.client.listen(channel, onNotify));
      onListen();
    },
    close: () => {
      if (!returned) {
        closed = true;
        returned = Promise.all(unlistens.map((u) => u().catch(() => {}))).then(() =>
          giveBack(open),
        );
      }
      return returned;
    },
  };
}
