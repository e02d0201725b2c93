import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/support/global-setup.ts"],
    // Tests spawn real processes (the claude CLI, git, a fake CLI) and start servers.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    // Most tests wait on processes (servers starting, CLI runs), so two files at a time use a
    // 2-core machine better than vitest's default of one worker fewer than there are cores.
    maxWorkers: 2,
    // Every test by name, so the output shows each database test ran on each back-end.
    reporters: ["verbose"],
  },
});
