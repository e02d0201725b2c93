import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  symlinkSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { build, type Plugin } from "esbuild";

// The server as one precompiled JavaScript file, for the tests that start it as a process: through
// tsx's loader each start takes most of a second longer, and loading the 530 modules of src/ and
// its dependencies one by one cost a third of a start's CPU (docs/development.md); the tests start
// it over a hundred times. The README's curl walk-through still starts it as `npm start` does
// (./user-server.ts).

const root = fileURLToPath(new URL("../..", import.meta.url));

/**
 * Bundles src/index.ts (types stripped, no type check: `npm run check` does that) into
 * `<dir>/src/index.js` in a new directory beside what the code finds by relative path
 * (package.json, drizzle/, node_modules/, the helper scripts it starts); returns the directory.
 */
export async function buildServer(): Promise<string> {
  const out = mkdtempSync(path.join(tmpdir(), "agent-bridge-test-build-"));
  // What src/ runs or reads beside its modules: the spawner's helper, the initdb worker.
  for (const entry of readdirSync(path.join(root, "src"), {
    recursive: true,
    withFileTypes: true,
  })) {
    if (!entry.isFile() || entry.name.endsWith(".ts")) continue;
    const source = path.join(entry.parentPath, entry.name);
    const target = path.join(out, path.relative(root, source));
    mkdirSync(path.dirname(target), { recursive: true });
    copyFileSync(source, target);
  }
  copyFileSync(path.join(root, "package.json"), path.join(out, "package.json"));
  for (const name of ["drizzle", "node_modules"])
    symlinkSync(path.join(root, name), path.join(out, name));
  await build({
    entryPoints: [path.join(root, "src/index.ts")],
    outfile: path.join(out, "src/index.js"),
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    // PGlite finds its WebAssembly and file-system image beside its own modules.
    external: ["@electric-sql/pglite", "@electric-sql/pglite/*"],
    // The CommonJS dependencies' `require` of Node's modules, in an ES module.
    banner: {
      js: 'import { createRequire as bundleRequire } from "node:module"; const require = bundleRequire(import.meta.url);',
    },
    plugins: [ownModuleUrls(out)],
    logLevel: "warning",
  });
  return out;
}

/**
 * Each module of src/ keeps its own `import.meta.url` (that of its place in `out`), not the
 * bundle's: the code finds files relative to it.
 */
function ownModuleUrls(out: string): Plugin {
  return {
    name: "own-module-urls",
    setup(bundle) {
      const src = path.join(root, "src");
      bundle.onLoad({ filter: /\.ts$/ }, (args) => {
        if (!args.path.startsWith(src)) return undefined;
        const place = path.join(out, path.relative(root, args.path)).replace(/\.ts$/, ".js");
        const contents = readFileSync(args.path, "utf8").replaceAll(
          "import.meta.url",
          JSON.stringify(pathToFileURL(place).href),
        );
        return { contents, loader: "ts" };
      });
    },
  };
}
