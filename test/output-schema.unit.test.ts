import { describe, expect, it } from "vitest";
import { outputSchemaProblem, structuredOutputProblem } from "../src/output-schema.js";

// An output schema's patterns run in time linear in the answer, whatever a tenant writes.

const schemaWith = (pattern: string) => ({
  type: "object",
  properties: { name: { type: "string", pattern } },
  required: ["name"],
});

describe("an output schema's pattern", () => {
  it("matches an answer built to make a backtracking engine run for ever, at once", () => {
    // With JavaScript's RegExp this check would take 2^40 steps: it would not return today.
    const schema = schemaWith("^(a+)+$");
    expect(outputSchemaProblem(schema)).toBeUndefined();
    const problem = structuredOutputProblem(schema, { name: `${"a".repeat(40)}!` });
    expect(problem).toMatch(/must match pattern/);
    expect(structuredOutputProblem(schema, { name: "aaaa" })).toBeUndefined();
  });

  it("searches the string, as JSON Schema says, unless anchored", () => {
    const schema = schemaWith("[0-9]{3}");
    expect(structuredOutputProblem(schema, { name: "PR 123 ok" })).toBeUndefined();
    expect(structuredOutputProblem(schema, { name: "PR 12" })).toMatch(/pattern/);
  });

  it("refuses lookaround and backreferences, which RE2 does not have", () => {
    expect(outputSchemaProblem(schemaWith("^(?=a)a$"))).toMatch(/not a valid JSON Schema/);
    expect(outputSchemaProblem(schemaWith("^(a)\\1$"))).toMatch(/not a valid JSON Schema/);
  });

  it("runs patternProperties on the same engine", () => {
    const schema = {
      type: "object",
      patternProperties: { "^(x+)+$": { type: "number" } },
    };
    expect(outputSchemaProblem(schema)).toBeUndefined();
    expect(structuredOutputProblem(schema, { [`${"x".repeat(40)}`]: "no" })).toMatch(/number/);
  });

  it("refuses uniqueItems anywhere in a schema, whose check is quadratic in the answer", () => {
    const schema = {
      type: "object",
      properties: { list: { type: "array", items: { type: "object" }, uniqueItems: true } },
    };
    expect(outputSchemaProblem(schema)).toMatch(/uniqueItems/);
    expect(
      outputSchemaProblem({
        type: "object",
        properties: { list: { type: "array", uniqueItems: false } },
      }),
    ).toBeUndefined();
  });
});
