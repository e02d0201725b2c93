import { makeMigratedCluster } from "./pglite-template.js";

// Once per test run, before any test process starts: the migrated cluster every embedded test
// database is copied from, so that concurrent test processes do not each make it.
export default async function setup(): Promise<void> {
  await makeMigratedCluster();
}
