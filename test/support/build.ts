import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

// The server as precompiled JavaScript, for the tests that start it as a process: through tsx's
// loader each start takes most of a second longer (1.4 s to ready against 0.6 s from JavaScript),
// and the tests start it dozens of times. The README's examples still start it
// as `npm start` does (./npm-start.ts).

const root = fileURLToPath(new URL("../..", import.meta.url));

/**
 * Transpiles src/ (types stripped, no type check: `npm run check` does that) into a new directory
 * beside what the code finds by relative path (package.json, drizzle/, node_modules/); returns it.
 */
export function buildServer(): string {
  const out = mkdtempSync(path.join(tmpdir(), "agent-bridge-test-build-"));
  const { config } = ts.readConfigFile(path.join(root, "tsconfig.json"), ts.sys.readFile);
  // ES modules, as the package is: on its own a file cannot tell NodeNext which it is.
  const options = {
    ...ts.convertCompilerOptionsFromJson(config.compilerOptions, root).options,
    module: ts.ModuleKind.ESNext,
  };
  for (const entry of readdirSync(path.join(root, "src"), {
    recursive: true,
    withFileTypes: true,
  })) {
    if (!entry.isFile()) continue;
    const source = path.join(entry.parentPath, entry.name);
    const target = path.join(out, path.relative(root, source));
    mkdirSync(path.dirname(target), { recursive: true });
    if (entry.name.endsWith(".ts")) {
      const { outputText } = ts.transpileModule(readFileSync(source, "utf8"), {
        compilerOptions: options,
        fileName: source,
      });
      writeFileSync(target.replace(/\.ts$/, ".js"), outputText);
    } else {
      copyFileSync(source, target);
    }
  }
  copyFileSync(path.join(root, "package.json"), path.join(out, "package.json"));
  for (const name of ["drizzle", "node_modules"])
    symlinkSync(path.join(root, name), path.join(out, name));
  return out;
}
