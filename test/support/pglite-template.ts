import { cpSync, existsSync, mkdtempSync, renameSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { PGlite } from "@electric-sql/pglite";

// A fresh embedded data dir makes its server run initdb, which costs seconds of CPU, and tens of
// seconds on a loaded machine: a test about something else (callbacks across a restart) spent
// most of its time there. Such a test starts from a copy of an empty cluster made once per PGlite
// version instead. (The fresh start itself stays covered by the tests that start from nothing.)

// Named after the pinned PGlite version: another version may lay its files out differently.
const { dependencies } = createRequire(import.meta.url)("../../package.json") as {
  dependencies: Record<string, string>;
};
const template = path.join(
  tmpdir(),
  `agent-bridge-pglite-template-${dependencies["@electric-sql/pglite"]}`,
);

/** Puts an initialized, empty cluster where the server looks for one (`<dataDir>/pgdata`). */
export async function seedDataDir(dataDir: string): Promise<void> {
  if (!existsSync(template)) {
    // Made aside and renamed into place: a concurrent maker or a killed one leaves no half copy.
    const making = mkdtempSync(`${template}-making-`);
    const pglite = new PGlite(making);
    await pglite.waitReady;
    await pglite.close();
    try {
      renameSync(making, template);
    } catch {
      rmSync(making, { recursive: true, force: true });
    }
  }
  cpSync(template, path.join(dataDir, "pgdata"), { recursive: true });
}
