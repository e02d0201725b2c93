#!/usr/bin/env node
// The `agent-bridge` command. It runs the build in dist/ (`npm install` and `npm start` make it:
// scripts/build.mjs), which starts in a fraction of tsx's time; while src/ holds a file changed
// since that build, it runs src/ itself through tsx's loader instead, so it never runs older code.
import { readdirSync, statSync } from "node:fs";
import { fileURLToPath, pathToFileURL } from "node:url";

const src = fileURLToPath(new URL("..", import.meta.url));
const dist = fileURLToPath(new URL("../../dist/", import.meta.url));

/**
 * Whether dist/ was built after every file of src/ last changed (a few ms of stat calls): the
 * build's stamp holds when it began, against each file's change time, which a copy that keeps
 * modification times (`cp -p`, rsync, tar) cannot set back.
 */
function builtFresh() {
  const built = statSync(`${dist}.built`, { throwIfNoEntry: false })?.mtimeMs;
  return (
    built !== undefined &&
    readdirSync(src, { recursive: true, withFileTypes: true }).every(
      (entry) => statSync(`${entry.parentPath}/${entry.name}`).ctimeMs <= built,
    )
  );
}

if (builtFresh()) {
  await (await import(pathToFileURL(`${dist}cli/main.js`).href)).run();
} else {
  const { register } = await import("tsx/esm/api");
  register();
  await (await import("./main.ts")).run();
}
