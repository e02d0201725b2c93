import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import { buildServer } from "./build.js";
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
    /** The server compiled to JavaScript (./build.ts); removed when the run ends. */
    serverBuild: string;
    /** Names this run's Postgres test databases (./postgres-databases.ts), dropped when it ends. */
    testRun: string;
  }
}

// Once per test run, before any test process starts: the migrated cluster every embedded test
// database is copied from, and the migrated template database of the Postgres server's (made here
// so that concurrent test processes do not each make them), with what killed runs left there
// dropped; the dir those copies go in, which goes at the end with any copy a test left behind, as
// this run's Postgres test databases do; and the server compiled once for the tests that start it
// as a process.
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  // Side by side: the embedded cluster is this process's CPU, the template the Postgres server's,
  // the build esbuild's.
  const [built, ...made] = await Promise.allSettled([
    buildServer(),
    makeMigratedCluster(),
    makeMigratedTemplate(),
    dropAbandonedDatabases(),
  ]);
  const failed = made.find((result) => result.status === "rejected");
  if (built.status === "rejected") throw built.reason;
  const build = built.value;
  if (failed) {
    rmSync(build, { recursive: true, force: true });
    throw failed.reason;
  }
  project.provide("serverBuild", build);
  const dataDirs = mkdtempSync(join(tmpdir(), "agent-bridge-test-dbs-"));
  project.provide("testDataDirs", dataDirs);
  const run = newRunId();
  project.provide("testRun", run);
  return async () => {
    try {
      await dropRunDatabases(run);
    } finally {
      rmSync(dataDirs, { recursive: true, force: true });
      rmSync(build, { recursive: true, force: true });
    }
  };
}
