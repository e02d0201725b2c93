// Runs initdb for a new embedded data dir in a worker thread (see db.ts `initializeDataDir`).
// Plain JavaScript, so that it loads without the TypeScript loader.
import { workerData } from "node:worker_threads";
import { PGlite } from "@electric-sql/pglite";

const pglite = new PGlite(workerData.dataDir);
try {
  await pglite.waitReady;
} finally {
  await pglite.close();
}
