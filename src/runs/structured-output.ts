import type { CompletionEvent } from "../events.js";
import { type OutputSchemaValue, structuredOutputProblem } from "../output-schema.js";

// A run's answer against its output schema, decided by the bridge whatever the agent says:
// Claude Code ends `success` without an answer when its model never called the StructuredOutput
// tool with valid input (observed with 2.1.328), and codex's final message is only text.

/**
 * The completion as it goes out: `structured_output` only for a run with a schema; the checked
 * answer of a run that succeeded; null for one that did not, or whose answer is missing or does
 * not match the schema, which then ends `failed` with `output_invalid`, its text kept.
 */
export function settleStructuredOutput(
  schema: OutputSchemaValue | null,
  completion: CompletionEvent,
): CompletionEvent {
  const { structured_output: answer, ...rest } = completion;
  if (schema === null) return rest;
  if (completion.status !== "succeeded") return { ...rest, structured_output: null };
  const problem = structuredOutputProblem(schema, answer);
  if (problem === undefined) return { ...rest, structured_output: answer };
  return {
    ...rest,
    status: "failed",
    is_error: true,
    error: problem,
    error_code: "output_invalid",
    structured_output: null,
  };
}
