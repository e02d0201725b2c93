// Runs initdb for a new embedded data dir (argv[2]) in a process of its own (see db.ts
// `initializeDataDir`). Plain JavaScript, so that it loads without the TypeScript loader.
import { PGlite } from "@electric-sql/pglite";

const pglite = new PGlite(process.argv[2]);
try {
  await pglite.waitReady;
} finally {
  await pglite.close();
}
