import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

/** The binary `name` of the installed npm package `pkgName`, else `name` (looked up on PATH). */
export function installedBin(pkgName: string, name: string): string {
  try {
    const require = createRequire(import.meta.url);
    const pkgPath = require.resolve(`${pkgName}/package.json`);
    const pkg = require(pkgPath) as { bin?: Record<string, string> };
    const rel = pkg.bin?.[name];
    if (rel) {
      const bin = path.join(path.dirname(pkgPath), rel);
      if (existsSync(bin)) return bin;
    }
  } catch {
    // not installed: fall through to PATH
  }
  return name;
}
