import { existsSync } from "node:fs";
import { defineConfig } from "vitest/config";
import { TEST_NODE_FLAGS } from "./test/support/node-flags.js";

// The tests' temporary files (database copies, data dirs, repositories) go in memory where the
// machine has it, unless TMPDIR says otherwise: on the CI machine's disk (ext4 mounted with
// `discard`) copying and deleting a 39 MB embedded data dir took 1-2 s, and most tests make one;
// in /dev/shm it takes 0.1 s. Set here, before the global setup runs, so that it and every test
// process (which inherits the environment) agree on where the database template is.
if (!process.env.TMPDIR && existsSync("/dev/shm")) process.env.TMPDIR = "/dev/shm";

// The suite in three tiers, by what a test file starts (README "Development"):
// - unit: nothing but the code it imports: no database, no process, no global setup;
// - integration: the app in-process and the test databases (./test/support/db.ts), no process;
// - system: processes: the server, real agent CLIs and the fake one, git, bubblewrap, the agent
//   user's tools, proxies, Chromium, Postgres servers of its own.
// Unit and integration name their files; system takes every other, so a new file runs in the
// tier with every set-up until it is named elsewhere (test/tiers.test.ts checks that each file
// is in one tier, and that no name here is stale).
export const unitFiles = [
  "test/{backoff,config,once-more,prices}.test.ts",
  "test/agents/{child-env,run-budget}.test.ts",
  "test/agents/claude/{command,control,credentials,mapper}.test.ts",
  "test/agents/codex/{command,mapper}.test.ts",
  "test/gateway/upstream.test.ts",
  "test/hooks/verify.test.ts",
  "test/http/error-map.test.ts",
  "test/process/{framer,json-cutter,tenant-ids}.test.ts",
  "test/runs/{admission,run-state}.test.ts",
  "test/worktrees/config.test.ts",
  "test/tiers.test.ts",
];

export const integrationFiles = [
  "test/auth/call-admission.test.ts",
  "test/cluster/doorbell.test.ts",
  "test/gateway/{egress,gateway,openai}.test.ts",
  "test/http/{health,run-events,sessions,work-dir}.test.ts",
  "test/runs/{key-run-limit,log-writer,run-log,transaction-hooks}.test.ts",
  "test/store/{claim-queued,database,event-log,migrations,snapshot}.test.ts",
  "test/support/*.test.ts",
];

// The embedded databases, and the servers the system tests start from the compiled build.
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
    // (README "Development"). The test servers' processes run with it too (support/server.ts).
    execArgv: [...TEST_NODE_FLAGS],
    // One process runs many files: importing the app and its dependencies again for each file
    // cost more CPU than most files' tests. Each file still makes its own databases, servers and
    // temporary files, and no test changes module state (mocks, globals) it does not restore.
    isolate: false,
    // Most tests wait on processes, timers and servers rather than compute, so five files at a
    // time use a 2-core machine best (README "Development" has the measurements). One number for
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
