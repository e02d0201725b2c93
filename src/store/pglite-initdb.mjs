// Runs initdb for a new embedded data dir (argv[2]) in a process of its own (see db.ts
// `initializeDataDir`), which quotes what it writes to stderr: the error's message alone.
// Plain JavaScript, so that it loads without the TypeScript loader.
import { PGlite } from "@electric-sql/pglite";

try {
  const pglite = new PGlite(process.argv[2]);
  try {
    await pglite.waitReady;
  } finally {
    await pglite.close();
  }
} catch (err) {
  process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 1;
}
