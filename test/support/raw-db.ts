import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { drizzle as drizzlePglite } from "drizzle-orm/pglite";
import { drizzle as drizzlePostgres } from "drizzle-orm/postgres-js";
import postgres from "postgres";
import { inject } from "vitest";
import type { Database } from "../../src/store/db.js";
import * as schema from "../../src/store/schema.js";
import type { Backend } from "./db.js";
import { copyEmptyCluster } from "./pglite-template.js";
import { createServerDatabase } from "./postgres-databases.js";

// A database migrated step by step, for the tests of what a migration does to the rows it finds.

/** A raw connection that runs plain SQL, and a Drizzle database on the same connection. */
export interface RawDatabase {
  exec(statement: string): Promise<void>;
  db: Database;
  close(): Promise<void>;
}

export async function rawDatabase(backend: Backend): Promise<RawDatabase> {
  if (backend === "pglite") {
    // A copy of initdb's cluster: an in-memory PGlite runs initdb, seconds of CPU. In the run's
    // dir for test databases, which goes when the run ends, should a test never close it.
    const dir = mkdtempSync(join(inject("testDataDirs"), "raw-"));
    await copyEmptyCluster(dir);
    const client = new PGlite(dir);
    return {
      exec: async (s) => void (await client.exec(s)),
      db: drizzlePglite({ client, schema }) as unknown as Database,
      close: async () => {
        await client.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  }
  const { url, drop } = await createServerDatabase();
  const client = postgres(url, { max: 1, onnotice: () => {} });
  return {
    exec: async (s) => void (await client.unsafe(s)),
    db: drizzlePostgres({ client, schema }) as unknown as Database,
    close: async () => {
      await client.end();
      await drop();
    },
  };
}

const migrationsDir = join(import.meta.dirname, "../../drizzle");

/** Runs the migrations whose file names `which` accepts, in order. */
export async function migrate(raw: RawDatabase, which: (name: string) => boolean) {
  for (const file of readdirSync(migrationsDir)
    .filter((f) => f.endsWith(".sql"))
    .sort()) {
    if (!which(file)) continue;
    for (const statement of readFileSync(join(migrationsDir, file), "utf8").split(
      "--> statement-breakpoint",
    )) {
      await raw.exec(statement);
    }
  }
}
