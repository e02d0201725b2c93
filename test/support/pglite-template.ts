import { createHash } from "node:crypto";
import {
  cpSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { PGlite } from "@electric-sql/pglite";
import { openDatabase } from "../../src/store/db.js";

// A fresh embedded database runs initdb, which costs seconds of CPU, and tens of seconds on a
// loaded machine, and then every migration: tests about something else spent most of their time
// there. They start from copies instead: a server's data dir from a copy of an empty cluster, an
// in-memory database from a dump of a migrated one. Both are made once and kept in the temp dir
// under a name that says what they were made from. (Starting from nothing stays covered by the
// tests that do: startup, the data dir's lock, the CLI's keys on a new data dir.)

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

/** Puts an initialized, empty cluster where the server looks for one (`<dataDir>/pgdata`). */
export async function seedDataDir(dataDir: string): Promise<void> {
  await once(template, async (making) => {
    const pglite = new PGlite(making);
    await pglite.waitReady;
    await pglite.close();
  });
  cpSync(template, path.join(dataDir, "pgdata"), { recursive: true });
}

// Named after the migrations' contents too, so a new or changed migration makes a new dump.
const migrations = fileURLToPath(new URL("../../drizzle", import.meta.url));
const migrationsHash = createHash("sha256");
for (const entry of readdirSync(migrations, { recursive: true, withFileTypes: true }))
  if (entry.isFile()) {
    const file = path.join(entry.parentPath, entry.name);
    migrationsHash.update(path.relative(migrations, file)).update(readFileSync(file));
  }
const migratedDumpDir = `${template}-migrated-${migrationsHash.digest("hex").slice(0, 16)}`;
const migratedDumpFile = path.join(migratedDumpDir, "pgdata.tar");

/** Makes the migrated cluster's dump, if no earlier run made it (the test run's global setup). */
export async function makeMigratedDump(): Promise<void> {
  await once(migratedDumpDir, async (making) => {
    const dataDir = path.join(making, "data");
    await seedDataDir(dataDir);
    await (await openDatabase({ kind: "pglite", dataDir })).close();
    const pglite = new PGlite(path.join(dataDir, "pgdata"));
    await pglite.waitReady;
    const dump = await pglite.dumpDataDir("none");
    await pglite.close();
    writeFileSync(path.join(making, "pgdata.tar"), Buffer.from(await dump.arrayBuffer()));
    rmSync(dataDir, { recursive: true, force: true });
  });
}

let migratedDump: Promise<Blob> | undefined;

/** A migrated, empty cluster as PGlite's `loadDataDir` takes it; read once per test process. */
export function migratedCluster(): Promise<Blob> {
  migratedDump ??= makeMigratedDump().then(
    async () => new Blob([await readFile(migratedDumpFile)]),
  );
  return migratedDump;
}
