import { createHash } from "node:crypto";
import {
  cpSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
} from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { PGlite } from "@electric-sql/pglite";
import { openDatabase } from "../../src/store/db.js";

// A fresh embedded data dir runs initdb, which costs seconds of CPU, and tens of seconds on a
// loaded machine, and then every migration: tests about something else spent most of their time
// there. Their data dirs start as copies of a migrated, empty cluster instead, made once and kept
// in the temp dir under a name that says what it was made from. (Starting from nothing, initdb
// and every migration, stays covered by test/server.test.ts on an empty data dir.)

// Named after the pinned PGlite version: another version may lay its files out differently.
const { dependencies } = createRequire(import.meta.url)("../../package.json") as {
  dependencies: Record<string, string>;
};
const pgliteVersion = dependencies["@electric-sql/pglite"];
const template = path.join(tmpdir(), `agent-bridge-pglite-template-${pgliteVersion}`);

/** Makes `target` with `make` aside and renames it into place, unless it is there already. */
async function once(target: string, make: (making: string) => Promise<void>): Promise<void> {
  if (existsSync(target)) return;
  // A concurrent maker or a killed one leaves no half copy.
  const making = mkdtempSync(`${target}-making-`);
  try {
    await make(making);
    renameSync(making, target);
  } catch (err) {
    rmSync(making, { recursive: true, force: true });
    if (!existsSync(target)) throw err;
  }
}

async function emptyCluster(): Promise<string> {
  await once(template, async (making) => {
    const pglite = new PGlite(making);
    await pglite.waitReady;
    await pglite.close();
  });
  return template;
}

// Named after the migrations' contents too, so a new or changed migration makes a new one.
const migrations = fileURLToPath(new URL("../../drizzle", import.meta.url));
const migrationsHash = createHash("sha256");
for (const entry of readdirSync(migrations, { recursive: true, withFileTypes: true }))
  if (entry.isFile()) {
    const file = path.join(entry.parentPath, entry.name);
    migrationsHash.update(path.relative(migrations, file)).update(readFileSync(file));
  }
/** What the migrations hold: a template made from other migrations is not used. */
export const migrationsDigest = migrationsHash.digest("hex").slice(0, 16);
const migrated = `${template}-migrated-${migrationsDigest}`;

/**
 * Makes the migrated cluster if no earlier run made it: the test run's global setup does, before
 * any test process starts.
 */
export async function makeMigratedCluster(): Promise<void> {
  const empty = await emptyCluster();
  await once(migrated, async (making) => {
    cpSync(empty, path.join(making, "pgdata"), { recursive: true });
    await (await openDatabase({ kind: "pglite", dataDir: making })).close();
  });
}

/** Puts the cluster as initdb leaves it, with no migration run, in `dir`. */
export async function copyEmptyCluster(dir: string): Promise<void> {
  cpSync(await emptyCluster(), dir, { recursive: true });
}

/** Puts a migrated, empty cluster where the server looks for one (`<dataDir>/pgdata`). */
export async function seedDataDir(dataDir: string): Promise<void> {
  await makeMigratedCluster();
  cpSync(path.join(migrated, "pgdata"), path.join(dataDir, "pgdata"), { recursive: true });
}
