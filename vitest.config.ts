import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Tests spawn real processes (the claude CLI, git, a fake CLI) and start servers.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
  },
});
