import { readFileSync, writeFileSync } from "node:fs";
import { openApiYaml } from "../src/http/openapi-yaml.js";

// `npm run openapi` writes openapi.yaml from the code; `-- --check` fails when they differ.

const file = new URL("../openapi.yaml", import.meta.url);
const generated = openApiYaml();

if (process.argv.includes("--check")) {
  let committed = "";
  try {
    committed = readFileSync(file, "utf8");
  } catch {
    // a missing file differs like any other
  }
  if (committed !== generated) {
    process.stderr.write(
      "openapi.yaml is out of date with the code: run `npm run openapi` and commit it\n",
    );
    process.exit(1);
  }
  process.stdout.write("openapi.yaml matches the code\n");
} else {
  writeFileSync(file, generated);
  process.stdout.write("wrote openapi.yaml\n");
}
