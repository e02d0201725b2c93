// `npm run build`: src/ as JavaScript in dist/, what `npm start` and the `agent-bridge` command
// run. `npm install` and `npm ci` run it (postinstall), and so does every `npm start` (prestart),
// so a start never runs a build older than src/; it takes about a second, most of it esbuild's own
// start.
//
// Each module is transpiled on its own (types stripped, no type check: `npm run check` does that),
// not bundled: dist/ mirrors src/ file for file at the same depth, so what the code finds relative
// to its own module (../../drizzle, ../package.json, the helper scripts it starts beside it) is
// where it is from src/. The helper scripts (src/**/*.mjs) are copied as they are; the command's
// launcher (src/cli/bin.mjs) stays in src/, where it picks the build or the source.
// Plain JavaScript, not TypeScript: it runs before anything that compiles TypeScript.
import {
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = fileURLToPath(new URL("..", import.meta.url));
const src = path.join(root, "src");
const dist = path.join(root, "dist");
/** Named as src/cli/bin.mjs reads it. */
const BUILT_STAMP = ".built";

// Taken before src/ is read: a file written while the build runs is newer than the build.
const startedAt = new Date();
// Regular files only, and no editor's hidden ones (an Emacs lock `.#main.ts` is a dangling link).
const sources = readdirSync(src, { recursive: true, withFileTypes: true })
  .filter(
    (entry) => entry.isFile() && !entry.name.startsWith(".") && /\.(ts|mjs)$/.test(entry.name),
  )
  .map((entry) => path.relative(src, path.join(entry.parentPath, entry.name)))
  .filter((file) => file !== path.join("cli", "bin.mjs"));
const { outputFiles } = await build({
  entryPoints: sources.map((file) => path.join(src, file)),
  outdir: dist,
  outbase: src,
  platform: "node",
  format: "esm",
  target: "node20",
  loader: { ".mjs": "copy" },
  write: false,
  logLevel: "warning",
});

// Only what changed is written, each to a new file renamed into place, and only what src/ no
// longer has is removed: a server already running from dist/ (a second `npm start`, a test's)
// still finds the modules it imports late, whole.
const built = new Set();
for (const { path: file, contents } of outputFiles) {
  built.add(file);
  let old;
  try {
    old = readFileSync(file);
  } catch {
    // Not built before.
  }
  if (old?.equals(contents)) continue;
  mkdirSync(path.dirname(file), { recursive: true });
  const fresh = `${file}.${process.pid}.tmp`;
  writeFileSync(fresh, contents);
  renameSync(fresh, file);
}
for (const file of readdirSync(dist, { recursive: true, encoding: "utf8" })) {
  const full = path.join(dist, file);
  if (/\.(js|mjs)$/.test(file) && !built.has(full)) rmSync(full);
}
// When this build began, for the command's launcher to tell it is not older than src/.
const stamp = path.join(dist, BUILT_STAMP);
writeFileSync(stamp, "");
utimesSync(stamp, startedAt, startedAt);
