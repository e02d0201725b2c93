import { existsSync } from "node:fs";
import { defineConfig } from "vitest/config";
import { TEST_NODE_FLAGS } from "./test/support/node-flags.js";

// The tests' temporary files (database copies, data dirs, repositories) go in memory where the
// machine has it, unless TMPDIR says otherwise: on the CI machine's disk (ext4 mounted with
// `discard`) copying and deleting a 39 MB embedded data dir took 1-2 s, and most tests make one;
// in /dev/shm it takes 0.1 s. Set here, before the global setup runs, so that it and every test
// process (which inherits the environment) agree on where the database template is.
if (!process.env.TMPDIR && existsSync("/dev/shm")) process.env.TMPDIR = "/dev/shm";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/support/global-setup.ts"],
    // Tests spawn real processes (the claude CLI, git, a fake CLI) and start servers.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    // The embedded database is WebAssembly. V8 compiles it with its baseline compiler and then
    // again, optimized, for the functions that run hot; a test process lives too short for the
    // second to pay: without it an embedded database costs 30-40 % less CPU to open and query
    // (README "Development"). The test servers' processes run with it too (support/server.ts).
    execArgv: [...TEST_NODE_FLAGS],
    // One process runs many files: importing the app and its dependencies again for each file
    // cost more CPU than most files' tests. Each file still makes its own databases, servers and
    // temporary files, and no test changes module state (mocks, globals) it does not restore.
    isolate: false,
    // Most tests wait on processes, timers and servers rather than compute, so five files at a
    // time use a 2-core machine best (README "Development" has the measurements).
    maxWorkers: 5,
    // Every test by name, so the output shows each database test ran on each back-end.
    reporters: ["verbose"],
  },
});
