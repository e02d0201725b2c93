import { DomainError } from "../errors.js";
import { CHANGE_TEMPLATE_NAMES, type ChangeNames } from "./checkout.js";

// Prompt templates: `{{payload.pull_request.title}}`, `{{event}}`, `{{delivery_id}}` and the like,
// filled in one pass. A value is inserted as text and never read as a template again, so a
// payload holding `{{…}}` cannot reach other values; nothing is ever evaluated.

/** A value longer than this many characters is cut there and ends with "…". */
export const MAX_VALUE_CHARS = 16_384;

/** The names a template may use besides `payload.<path>`. */
export const TEMPLATE_NAMES = [
  "event",
  "delivery_id",
  "hook",
  "fire_time",
  ...CHANGE_TEMPLATE_NAMES,
] as const;

const PLACEHOLDER = /\{\{\s*([^{}]*?)\s*\}\}/g;
const PATH = /^payload(\.[A-Za-z0-9_-]+)*$/;

/**
 * A delivery's values; `pull_request.*` are what it says of its pull (merge) request
 * (src/hooks/checkout.ts), empty when it says nothing.
 */
export interface TemplateContext extends ChangeNames {
  payload: unknown;
  event: string;
  delivery_id: string;
  hook: string;
  /** The tick's time, for a scheduled run (ISO 8601); empty otherwise. */
  fire_time: string;
}

/** The placeholders of a template that name nothing known (for validating a hook). */
export function unknownPlaceholders(template: string): string[] {
  const unknown: string[] = [];
  for (const match of template.matchAll(PLACEHOLDER)) {
    const name = match[1] ?? "";
    if (!PATH.test(name) && !(TEMPLATE_NAMES as readonly string[]).includes(name)) {
      unknown.push(match[0]);
    }
  }
  return unknown;
}

/** Looks a dotted path up in parsed JSON, own properties only; a number indexes an array. */
function lookup(root: unknown, path: string[]): unknown {
  let value = root;
  for (const key of path) {
    if (value === null || typeof value !== "object") return undefined;
    if (!Object.hasOwn(value, key)) return undefined;
    value = (value as Record<string, unknown>)[key];
  }
  return value;
}

/** The text a value is inserted as: strings as they are, other JSON as JSON; missing is empty. */
export function asText(value: unknown): string {
  let text: string;
  if (value === undefined || value === null) text = "";
  else if (typeof value === "string") text = value;
  else text = JSON.stringify(value);
  return cut(text);
}

function cut(text: string): string {
  if (text.length <= MAX_VALUE_CHARS) return text;
  let end = MAX_VALUE_CHARS;
  // Not between the two halves of a surrogate pair.
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end--;
  return `${text.slice(0, end)}…`;
}

/** A template rendered past its byte limit; rendering stopped there. */
export class PromptTooLargeError extends DomainError {
  constructor(
    readonly template: string,
    readonly maxBytes: number,
  ) {
    super(
      "prompt_too_large",
      `the ${template} renders to more than ${maxBytes} bytes for this delivery (AGENT_BRIDGE_HOOK_PROMPT_MAX_BYTES)`,
    );
  }
}

/**
 * The bytes a template is reserved at registration: its fixed text in UTF-8 bytes plus, for each
 * placeholder, a value of MAX_VALUE_CHARS characters counted at one byte each (an ASCII value cut
 * to its length). A template past the limit by this count exceeds it once its values are long
 * enough; one within it may still exceed it with many-byte values, which the delivery's render
 * catches.
 */
export function reservedBytes(template: string): number {
  let placeholders = 0;
  const fixed = template.replace(PLACEHOLDER, () => {
    placeholders++;
    return "";
  });
  return Buffer.byteLength(fixed) + placeholders * MAX_VALUE_CHARS;
}

/**
 * Fills the template in one pass. With `limit`, the UTF-8 bytes of the text so far are counted as
 * it grows, and PromptTooLargeError is thrown as soon as they pass the limit: a template that
 * repeats a large value stops there instead of building the whole text first.
 */
export function render(
  template: string,
  context: TemplateContext,
  limit?: { maxBytes: number; name: string },
): string {
  const parts: string[] = [];
  let bytes = 0;
  const add = (text: string) => {
    bytes += Buffer.byteLength(text);
    if (limit && bytes > limit.maxBytes) throw new PromptTooLargeError(limit.name, limit.maxBytes);
    parts.push(text);
  };
  let last = 0;
  for (const match of template.matchAll(PLACEHOLDER)) {
    add(template.slice(last, match.index));
    add(replacementFor(match[0], match[1] ?? "", context));
    last = match.index + match[0].length;
  }
  add(template.slice(last));
  return parts.join("");
}

/** What one placeholder is replaced by; one naming nothing known stays as it is. */
function replacementFor(whole: string, name: string, context: TemplateContext): string {
  if (name === "payload" || name.startsWith("payload.")) {
    if (!PATH.test(name)) return whole;
    return asText(lookup(context.payload, name.split(".").slice(1)));
  }
  if ((TEMPLATE_NAMES as readonly string[]).includes(name)) {
    return cut(context[name as (typeof TEMPLATE_NAMES)[number]]);
  }
  return whole;
}
