// Prompt templates: `{{payload.pull_request.title}}`, `{{event}}`, `{{delivery_id}}` and the like,
// filled in one pass. A value is inserted as text and never read as a template again, so a
// payload holding `{{…}}` cannot reach other values; nothing is ever evaluated.

/** A value longer than this many characters is cut there and ends with "…". */
export const MAX_VALUE_CHARS = 16_384;

/** The names a template may use besides `payload.<path>`. */
export const TEMPLATE_NAMES = ["event", "delivery_id", "hook", "fire_time"] as const;

const PLACEHOLDER = /\{\{\s*([^{}]*?)\s*\}\}/g;
const PATH = /^payload(\.[A-Za-z0-9_-]+)*$/;

export interface TemplateContext {
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

export function render(template: string, context: TemplateContext): string {
  return template.replace(PLACEHOLDER, (whole, name: string) => {
    if (name === "payload" || name.startsWith("payload.")) {
      if (!PATH.test(name)) return whole;
      return asText(lookup(context.payload, name.split(".").slice(1)));
    }
    if ((TEMPLATE_NAMES as readonly string[]).includes(name)) {
      return cut(context[name as (typeof TEMPLATE_NAMES)[number]]);
    }
    return whole;
  });
}
