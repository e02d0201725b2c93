import { execFileSync } from "node:child_process";
import { rmSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { TestProject } from "vitest/node";
import { buildServer } from "./build.js";

// Once per run of the project that starts the server as a process (vitest.config.ts): the server
// compiled once (./build.ts), removed when the run ends; and dist/ brought up to date, as `npm
// start` does before it starts (scripts/build.mjs), for the tests that start it as npm start does
// and run the `agent-bridge` command.
export default async function setup(project: TestProject): Promise<() => void> {
  execFileSync(
    process.execPath,
    [fileURLToPath(new URL("../../scripts/build.mjs", import.meta.url))],
    {
      stdio: "inherit",
    },
  );
  const build = await buildServer();
  project.provide("serverBuild", build);
  return () => rmSync(build, { recursive: true, force: true });
}
