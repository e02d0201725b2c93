import { readFileSync } from "node:fs";
import { expect, it } from "vitest";
import { generatedFiles, root, TYPES_PATH } from "../../scripts/generated.js";

// The client's types are generated from openapi.yaml (openapi-typescript) and committed; like the
// spec itself (test/http/openapi.test.ts), they must be what the code makes today.

it("src/client/schema.ts is what `npm run openapi` generates (run it after changing a route)", async () => {
  const types = (await generatedFiles()).find((f) => f.path === TYPES_PATH);
  expect(readFileSync(`${root}${TYPES_PATH}`, "utf8")).toBe(types?.text);
});
