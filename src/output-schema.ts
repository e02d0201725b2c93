import { z } from "@hono/zod-openapi";
import { Ajv, type CodeOptions, type ErrorObject, type ValidateFunction } from "ajv";
import { RE2JS } from "re2js";

// A run's output schema (`output_schema`): the JSON Schema its agent's final answer must match.
// Both CLIs need an object at the top (Claude Code makes it the input schema of a tool, which the
// Messages API requires to be an object; codex sends it as the Responses API's `text.format`), so
// only an object schema is taken.
//
// Checked with Ajv as Claude Code 2.1.328 checks `--json-schema` (observed: it refuses a schema
// that Ajv's default draft-07 class with strict mode refuses, e.g. an unknown keyword, a
// `$schema` of draft 2020-12 or `minProperties: -1`, and it ignores `format`): strict mode stays
// on for unknown keywords, since a schema the CLI refuses would fail every run that carries it;
// `format` is not checked, as the CLI does not check it either. The same Ajv checks the agent's
// answer, so that what the bridge accepts and what the CLI accepts never disagree, but for one
// thing: `pattern` and `patternProperties` run on RE2 (re2js), in time linear in the answer. With
// JavaScript's backtracking RegExp, a tenant's schema holding `^(a+)+$` and an answer its agent
// wrote to match would hold the server's one thread for minutes; RE2 has no lookaround and no
// backreferences, so a schema using them is refused.

/** The most a schema may take, serialized as JSON (it goes on Claude Code's command line). */
export const MAX_OUTPUT_SCHEMA_BYTES = 64 * 1024;
/** How deep objects and arrays may nest in a schema; real ones nest a few levels. */
export const MAX_OUTPUT_SCHEMA_DEPTH = 32;
/** How many of Ajv's errors a run's error names. */
const ERRORS_SHOWN = 3;

export type OutputSchemaValue = Record<string, unknown>;

/** Ajv's regular expressions on RE2; `code` is what standalone code would import (none is made). */
const linearTime: NonNullable<CodeOptions["regExp"]> = Object.assign(
  (pattern: string) => RE2JS.compile(pattern),
  {
    code: 'require("re2js").RE2JS.compile',
  },
);

const ajv = new Ajv({
  allErrors: true,
  validateFormats: false,
  strictTypes: false,
  logger: false,
  code: { regExp: linearTime },
});

/**
 * Each schema is removed from Ajv once compiled: Ajv keeps every schema it compiled (a server
 * would keep them all), and refuses a second schema with an `$id` it holds.
 */
function compile(schema: OutputSchemaValue): ValidateFunction {
  try {
    return ajv.compile(schema);
  } finally {
    ajv.removeSchema(schema);
  }
}

/** How deep objects and arrays nest in `value` (0 for a scalar); walked with a stack. */
function depthOf(value: unknown): number {
  let deepest = 0;
  const stack: [unknown, number][] = [[value, 0]];
  for (let next = stack.pop(); next; next = stack.pop()) {
    const [item, depth] = next;
    if (item === null || typeof item !== "object") continue;
    deepest = Math.max(deepest, depth + 1);
    if (deepest > MAX_OUTPUT_SCHEMA_DEPTH) return deepest;
    for (const v of Object.values(item)) stack.push([v, depth + 1]);
  }
  return deepest;
}

/** Whether any object in `schema` has `uniqueItems: true` (walked with a stack). */
function holdsUniqueItems(schema: unknown): boolean {
  const stack: unknown[] = [schema];
  for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
    if (item === null || typeof item !== "object") continue;
    if (!Array.isArray(item) && (item as Record<string, unknown>).uniqueItems === true) return true;
    stack.push(...Object.values(item));
  }
  return false;
}

/** Why `schema` is not one a run may carry; undefined when it is. */
export function outputSchemaProblem(schema: OutputSchemaValue): string | undefined {
  if (depthOf(schema) > MAX_OUTPUT_SCHEMA_DEPTH) {
    return `must not nest objects and arrays more than ${MAX_OUTPUT_SCHEMA_DEPTH} levels deep`;
  }
  if (Buffer.byteLength(JSON.stringify(schema)) > MAX_OUTPUT_SCHEMA_BYTES) {
    return `must be at most ${MAX_OUTPUT_SCHEMA_BYTES} bytes as JSON`;
  }
  if (schema.type !== "object") {
    return 'must be an object schema (`"type": "object"`): both agents need an object as the answer';
  }
  // Ajv compares an array's objects pairwise for it: an answer of 100 000 objects would hold the
  // server's thread for minutes.
  if (holdsUniqueItems(schema))
    return "must not use `uniqueItems`, whose check takes time quadratic in the answer";
  // An async schema's validation is a promise, which the run's end does not wait for.
  if (schema.$async !== undefined) return "must not be an async schema (`$async`)";
  try {
    compile(schema);
  } catch (err) {
    return `is not a valid JSON Schema (draft-07, strict): ${(err as Error).message}`;
  }
  return undefined;
}

/** Ajv's first few errors, as one line. */
function describe(errors: ErrorObject[]): string {
  const shown = errors
    .slice(0, ERRORS_SHOWN)
    .map((e) => `${e.instancePath || "(the answer)"} ${e.message ?? "is invalid"}`);
  const more = errors.length - shown.length;
  return shown.join("; ") + (more > 0 ? `; and ${more} more` : "");
}

/**
 * Why `value` does not match `schema` (which outputSchemaProblem accepted); undefined when it
 * does. `undefined` is an answer the agent never gave.
 */
export function structuredOutputProblem(
  schema: OutputSchemaValue,
  value: unknown,
): string | undefined {
  if (value === undefined) return "the agent gave no structured output";
  const validate = compile(schema);
  if (validate(value)) return undefined;
  return `the agent's structured output does not match output_schema: ${describe(validate.errors ?? [])}`;
}

export const OUTPUT_SCHEMA_HELP = `A JSON Schema (draft-07) the agent's final answer must match, as an object schema (\`"type": "object"\`), at most ${MAX_OUTPUT_SCHEMA_BYTES} bytes as JSON and ${MAX_OUTPUT_SCHEMA_DEPTH} levels deep. Strict: an unknown keyword is refused (as Claude Code refuses it); \`format\` is not checked; \`pattern\` is RE2 syntax (no lookaround, no backreferences), matched in linear time; \`uniqueItems\` is refused (its check is quadratic in the answer). The completion then carries \`structured_output\`, the answer checked against it; an answer that is missing or does not match ends the run \`failed\` with \`error_code: output_invalid\`, its text kept. Codex sends it to the model in the Responses API's strict mode, which also wants \`additionalProperties: false\` and every property \`required\` in each object.`;

export const OutputSchema = z
  .record(z.string(), z.unknown())
  .superRefine((schema, ctx) => {
    const problem = outputSchemaProblem(schema);
    if (problem) ctx.addIssue({ code: "custom", message: problem });
  })
  .openapi("OutputSchema", {
    type: "object",
    additionalProperties: true,
    description: OUTPUT_SCHEMA_HELP,
    example: {
      type: "object",
      properties: { verdict: { type: "string", enum: ["approve", "request_changes"] } },
      required: ["verdict"],
    },
  });
