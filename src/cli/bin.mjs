#!/usr/bin/env node
// The `agent-bridge` command. It runs the build in dist/ (`npm install` and `npm start` make it:
// scripts/build.mjs), which starts in a fraction of tsx's time; while src/ holds a file changed
// since that build, it runs src/ itself through tsx's loader instead, so it never runs older code.
import { readdirSync, statSync } from "node:fs";
import { fileURLToPath } from "node:url";

const src = fileURLToPath(new URL("..", import.meta.url));
const dist = fileURLToPath(new URL("../../dist/", import.meta.url));

/** Whether dist/ was built after every file of src/ was last written (a few ms of stat calls). */
function builtFresh() {
  const built = statSync(`${dist}.built`, { throwIfNoEntry: false })?.mtimeMs;
  return (
    built !== undefined &&
    readdirSync(src, { recursive: true, withFileTypes: true }).every(
      (entry) => statSync(`${entry.parentPath}/${entry.name}`).mtimeMs <= built,
    )
  );
}

if (builtFresh()) {
  await (await import(`${dist}cli/main.js`)).run();
} else {
  const { register } = await import("tsx/esm/api");
  register();
  await (await import("./main.ts")).run();
}
