import { describe, expect, it } from "vitest";
import { bareCompletion, type CompletionEvent } from "../../src/events.js";
import { settleStructuredOutput } from "../../src/runs/structured-output.js";

// What a run's completion says of its answer, whatever its agent reported.

const SCHEMA = {
  type: "object",
  properties: {
    a: { type: "string" },
    b: { type: "string" },
    c: { type: "string" },
    d: { type: "string" },
  },
  required: ["a", "b", "c", "d"],
};

const succeeded = (answer?: unknown): CompletionEvent => ({
  ...bareCompletion("succeeded", ""),
  is_error: false,
  error: null,
  result: "text",
  ...(answer === undefined ? {} : { structured_output: answer }),
});

describe("settling a run's structured output", () => {
  it("keeps a matching answer of a run that succeeded", () => {
    const answer = { a: "1", b: "2", c: "3", d: "4" };
    expect(settleStructuredOutput(SCHEMA, succeeded(answer))).toMatchObject({
      status: "succeeded",
      structured_output: answer,
    });
  });

  it("fails a run whose answer does not match, naming the first three problems and how many more", () => {
    const settled = settleStructuredOutput(SCHEMA, succeeded({ a: 1, b: 2, c: 3, d: 4 }));
    expect(settled).toMatchObject({
      status: "failed",
      is_error: true,
      error_code: "output_invalid",
      result: "text",
      structured_output: null,
    });
    expect(settled.error).toBe(
      "the agent's structured output does not match output_schema: /a must be string; /b must be string; /c must be string; and 1 more",
    );
  });

  it("gives a run that did not succeed a null answer and leaves its status and error as they were", () => {
    const cancelled = {
      ...succeeded({ a: "1", b: "2", c: "3", d: "4" }),
      ...bareCompletion("cancelled", "stop"),
    };
    expect(settleStructuredOutput(SCHEMA, cancelled)).toMatchObject({
      status: "cancelled",
      error: "stop",
      structured_output: null,
    });
  });

  it("leaves structured_output out of a run without a schema, whatever its agent reported", () => {
    expect(settleStructuredOutput(null, succeeded({ a: "1" }))).not.toHaveProperty(
      "structured_output",
    );
  });
});
