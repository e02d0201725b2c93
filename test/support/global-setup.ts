import { makeMigratedCluster } from "./pglite-template.js";

// Once per test run, before any test process starts: the migrated cluster every in-memory test
// database is loaded from, so that concurrent test processes do not each make it.
export default async function setup(): Promise<void> {
  await makeMigratedCluster();
}
