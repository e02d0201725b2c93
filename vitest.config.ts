import { existsSync } from "node:fs";
import { defineConfig } from "vitest/config";
import { TEST_NODE_FLAGS } from "./test/support/node-flags.js";

// The tests' temporary files (database copies, data dirs, repositories) go in memory where the
// machine has it, unless TMPDIR says otherwise: on the CI machine's disk (ext4 mounted with
// `discard`) copying and deleting a 39 MB embedded data dir took 1-2 s, and most tests make one;
// in /dev/shm it takes 0.1 s. Set here, before the global setup runs, so that it and every test
// process (which inherits the environment) agree on where the database template is.
if (!process.env.TMPDIR && existsSync("/dev/shm")) process.env.TMPDIR = "/dev/shm";

// The suite in three tiers, by what a test file starts (docs/development.md), named by its suffix:
// - unit (`*.unit.test.ts`): nothing but the code it imports: no database, no process, no global
//   setup;
// - integration (`*.integration.test.ts`): the app in-process and the test databases
//   (./test/support/db.ts), no process;
// - system (every other): processes: the server, real agent CLIs and the fake one, git,
//   bubblewrap, the agent user's tools, proxies, Chromium, Postgres servers of its own. A new file
//   runs in the tier with every set-up until its name says otherwise.
const unitFiles = ["test/**/*.unit.test.ts"];
const integrationFiles = ["test/**/*.integration.test.ts"];

const databases = "test/support/global-setup.ts";
const serverBuild = "test/support/build-setup.ts";

export default defineConfig({
  test: {
    // What every tier shares (each project below extends this config).
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    // The embedded database is WebAssembly. V8 compiles it with its baseline compiler and then
    // again, optimized, for the functions that run hot; a test process lives too short for the
    // second to pay: without it an embedded database costs 30-40 % less CPU to open and query
    // (docs/development.md). The test servers' processes run with it too (support/server.ts).
    execArgv: [...TEST_NODE_FLAGS],
    // One process runs many files: importing the app and its dependencies again for each file
    // cost more CPU than most files' tests. Each file still makes its own databases, servers and
    // temporary files, and no test changes module state (mocks, globals) it does not restore.
    isolate: false,
    // Most tests wait on processes, timers and servers rather than compute, so five files at a
    // time use a 2-core machine best (bench/results/HISTORY.md has the measurements). One number for
    // every tier: vitest runs projects with different ones one after the other, not side by side.
    maxWorkers: 5,
    // Every test by name, so the output shows each database test ran on each back-end.
    reporters: ["verbose"],
    projects: [
      {
        extends: true,
        // No global setup: nothing here opens a database or starts the server.
        test: { name: "unit", include: unitFiles },
      },
      {
        extends: true,
        test: { name: "integration", include: integrationFiles, globalSetup: [databases] },
      },
      {
        extends: true,
        test: {
          name: "system",
          include: ["test/**/*.test.ts"],
          exclude: [...unitFiles, ...integrationFiles],
          globalSetup: [databases, serverBuild],
        },
      },
    ],
  },
});
