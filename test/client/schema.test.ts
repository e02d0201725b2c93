import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";

// The client's types are generated from openapi.yaml (openapi-typescript) and committed; like the
// spec itself, they must be what the code makes today.

const root = fileURLToPath(new URL("../..", import.meta.url));

it("src/client/schema.ts is what `npm run openapi` generates (run it after changing a route)", () => {
  const res = spawnSync(`${root}node_modules/.bin/tsx`, ["scripts/openapi.ts", "--check"], {
    cwd: root,
    encoding: "utf8",
  });
  expect(res.stderr).toBe("");
  expect(res.status).toBe(0);
});
