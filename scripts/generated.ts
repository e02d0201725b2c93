import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import openapiTS, { astToString, COMMENT_HEADER } from "openapi-typescript";
import { openApiYaml } from "../src/http/openapi-yaml.js";

// The files made from the code and committed: openapi.yaml from the routes, and the client's
// types from openapi.yaml (openapi-typescript).

export const root = fileURLToPath(new URL("..", import.meta.url));
/** The client's types, from the project's root. */
export const TYPES_PATH = "src/client/schema.ts";

/** Each generated file's path (from the project's root) and what the code makes of it today. */
export async function generatedFiles(): Promise<{ path: string; text: string }[]> {
  const spec = { path: "openapi.yaml", text: openApiYaml() };
  return [spec, { path: TYPES_PATH, text: await clientTypes(spec.text) }];
}

/** The openapi-typescript output for the spec, formatted as Biome would so that lint stays clean. */
async function clientTypes(yaml: string): Promise<string> {
  const source = COMMENT_HEADER + astToString(await openapiTS(yaml, { defaultNonNullable: false }));
  const biome = spawnSync(
    `${root}node_modules/.bin/biome`,
    ["format", `--stdin-file-path=${TYPES_PATH}`],
    { cwd: root, input: source, encoding: "utf8" },
  );
  if (biome.status !== 0) throw new Error(`biome format failed:\n${biome.stderr}`);
  return biome.stdout;
}
