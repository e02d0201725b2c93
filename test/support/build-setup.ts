import { rmSync } from "node:fs";
import type { TestProject } from "vitest/node";
import { buildServer } from "./build.js";

// Once per run of the project that starts the server as a process (vitest.config.ts): the server
// compiled once (./build.ts), removed when the run ends.
export default async function setup(project: TestProject): Promise<() => void> {
  const build = await buildServer();
  project.provide("serverBuild", build);
  return () => rmSync(build, { recursive: true, force: true });
}
