import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import { makeMigratedCluster } from "./pglite-template.js";
import {
  dropAbandonedDatabases,
  dropRunDatabases,
  makeMigratedTemplate,
  newRunId,
} from "./postgres-databases.js";

declare module "vitest" {
  export interface ProvidedContext {
    /** Where the run's embedded test databases live (./db.ts); removed when the run ends. */
    testDataDirs: string;
    /** Names this run's Postgres test databases (./postgres-databases.ts), dropped when it ends. */
    testRun: string;
    /** The server compiled to JavaScript (./build.ts) by ./build-setup.ts; removed when it ends. */
    serverBuild: string;
  }
}

// Once per run of a project that opens test databases (vitest.config.ts), before its test
// processes start: the migrated cluster every embedded test database is copied from, and the
// migrated template database of the Postgres server's (made here so that concurrent test
// processes do not each make them; a later project's run finds both made), with what killed runs
// left there dropped; the dir those copies go in, which goes at the end with any copy a test left
// behind, as this run's Postgres test databases do.
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  // Side by side: the embedded cluster is this process's CPU, the template the Postgres server's.
  await Promise.all([makeMigratedCluster(), makeMigratedTemplate(), dropAbandonedDatabases()]);
  const dataDirs = mkdtempSync(join(tmpdir(), "agent-bridge-test-dbs-"));
  project.provide("testDataDirs", dataDirs);
  const run = newRunId();
  project.provide("testRun", run);
  return async () => {
    try {
      await dropRunDatabases(run);
    } finally {
      rmSync(dataDirs, { recursive: true, force: true });
    }
  };
}
