import { readFileSync, writeFileSync } from "node:fs";
import { generatedFiles, root } from "./generated.js";

// `npm run openapi` writes openapi.yaml from the code and the client's types from openapi.yaml;
// `-- --check` fails when either committed file differs from what the code makes.

const files = await generatedFiles();

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
