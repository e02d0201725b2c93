import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import openapiTS, { astToString, COMMENT_HEADER } from "openapi-typescript";
import { openApiYaml } from "../src/http/openapi-yaml.js";

// `npm run openapi` writes openapi.yaml from the code and the client's types from openapi.yaml;
// `-- --check` fails when either committed file differs from what the code makes.

const root = fileURLToPath(new URL("..", import.meta.url));
const TYPES_PATH = "src/client/schema.ts";
const spec = { path: "openapi.yaml", text: openApiYaml() };
const types = { path: TYPES_PATH, text: await clientTypes(spec.text) };

/** The openapi-typescript output for the spec, formatted as Biome would so that lint stays clean. */
async function clientTypes(yaml: string): Promise<string> {
  const source = COMMENT_HEADER + astToString(await openapiTS(yaml));
  const biome = spawnSync(
    `${root}node_modules/.bin/biome`,
    ["format", `--stdin-file-path=${TYPES_PATH}`],
    { cwd: root, input: source, encoding: "utf8" },
  );
  if (biome.status !== 0) throw new Error(`biome format failed:\n${biome.stderr}`);
  return biome.stdout;
}

const files = [spec, types];

if (process.argv.includes("--check")) {
  const stale = files.filter(({ path, text }) => {
    try {
      return readFileSync(`${root}${path}`, "utf8") !== text;
    } catch {
      return true; // a missing file differs like any other
    }
  });
  if (stale.length > 0) {
    process.stderr.write(
      `${stale.map((f) => f.path).join(" and ")} out of date with the code: run \`npm run openapi\` and commit\n`,
    );
    process.exit(1);
  }
  process.stdout.write(`${files.map((f) => f.path).join(" and ")} match the code\n`);
} else {
  for (const { path, text } of files) writeFileSync(`${root}${path}`, text);
  process.stdout.write(`wrote ${files.map((f) => f.path).join(" and ")}\n`);
}
