import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { openApiYaml } from "../../src/http/openapi-yaml.js";
import { createTestApp, type TestApp } from "../support/app.js";
import { runCommand } from "../support/process.js";

describe("the published contract", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp("pglite");
  });
  afterAll(() => t.close());

  it("openapi.yaml is what the code generates (run `npm run openapi` after changing a route)", () => {
    const committed = readFileSync(new URL("../../openapi.yaml", import.meta.url), "utf8");
    expect(committed).toBe(openApiYaml());
  });

  it("serves the same document at /openapi.json", async () => {
    const res = await t.app.request("/openapi.json");
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual(parse(openApiYaml()));
  });

  it("gives every operation a camelCase operationId and documents its errors as problem+json", () => {
    const doc = parse(openApiYaml());
    for (const [path, item] of Object.entries<Record<string, Record<string, unknown>>>(doc.paths)) {
      for (const [method, op] of Object.entries(item)) {
        expect(op.operationId, `${method} ${path}`).toMatch(/^[a-z][A-Za-z]+$/);
        const responses = op.responses as Record<string, { content?: Record<string, unknown> }>;
        for (const [status, response] of Object.entries(responses)) {
          if (Number(status) >= 400)
            expect(Object.keys(response.content ?? {})).toEqual(["application/problem+json"]);
        }
      }
    }
  });

  it("POST /v1/sessions has an example request, the sample /docs shows, and a default server accepts every example of it", async () => {
    const doc = await (await t.app.request("/openapi.json")).json();
    const media = doc.paths["/v1/sessions"].post.requestBody.content["application/json"];
    expect(media.schema).toEqual({ $ref: "#/components/schemas/CreateSession" });
    const schema = doc.components.schemas.CreateSession;
    const examples: unknown[] = [
      ...(media.example === undefined ? [] : [media.example]),
      ...Object.values<{ value: unknown }>(media.examples ?? {}).map((e) => e.value),
      ...(schema.example === undefined ? [] : [schema.example]),
      ...(schema.examples ?? []),
    ];
    // A body-level example is what the reference puts in its sample request; without one it
    // makes one up from the fields' examples and types.
    expect(schema.example).toBeDefined();
    for (const body of examples) {
      const res = await t.app.request("/v1/sessions", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body),
      });
      expect(res.status, `${JSON.stringify(body)}: ${await res.clone().text()}`).toBe(201);
    }
  });

  it("lints clean under Redocly's recommended rules (redocly.yaml), as `npm run check` runs it", async () => {
    const root = new URL("../..", import.meta.url).pathname;
    const lint = await runCommand(
      "npm",
      ["run", "--silent", "lint:openapi", "--", "--format=json"],
      {
        cwd: root,
        env: { PATH: process.env.PATH, HOME: process.env.HOME },
      },
    );
    const { totals, problems } = JSON.parse(lint.stdout);
    expect(problems).toEqual([]);
    // Only the probes' missing 4XX, each named in .redocly.lint-ignore.yaml with its reason.
    expect(totals).toEqual({ errors: 0, warnings: 0, ignored: 3 });
    expect(lint.code).toBe(0);
  });
});
