import { InvalidRequestError } from "../errors.js";
import { locationOf } from "./errors.js";

// What every part of a request (and a webhook's whole payload) must be before anything handles
// it. Postgres and PGlite refuse U+0000 in text and jsonb, and a lone UTF-16 surrogate in jsonb,
// while a text column takes one silently as U+FFFD: a request holding either would fail its
// insert (a 500) or be stored as something else than was sent. And JSON.stringify recurses, so a
// value nested thousands deep overflows the stack wherever it is written out (a jsonb column,
// the CLI's stdin, a template). No field of the API needs any of these: each is a 400 naming where
// it is, before anything is written.

export const NUL_MESSAGE = "must not contain U+0000 (NUL)";
export const LONE_SURROGATE_MESSAGE =
  "must not contain a lone UTF-16 surrogate (U+D800 to U+DFFF outside a pair): it is not text";
/** How deep objects and arrays may nest in a request; real payloads nest a few levels. */
export const MAX_JSON_DEPTH = 128;
export const DEPTH_MESSAGE = `must not nest objects and arrays more than ${MAX_JSON_DEPTH} levels deep`;

// With the `u` flag a surrogate pair is one code point, so this matches only unpaired halves.
const LONE_SURROGATE = /\p{Cs}/u;

function textFault(text: string): string | undefined {
  if (text.includes("\u0000")) return NUL_MESSAGE;
  if (LONE_SURROGATE.test(text)) return LONE_SURROGATE_MESSAGE;
  return undefined;
}

export interface InputIssue {
  /** `metadata.ticket`, `events.1`; empty for the value itself. */
  path: string;
  message: string;
}

/**
 * Each place in `value` that is not fit to handle, by path and why: a string holding U+0000 or a
 * lone surrogate, or an object or array nested past MAX_JSON_DEPTH (named once, where it passes
 * the bound; nothing below it is walked). A key that is not text is reported at its object's path,
 * as is everything under it, so that no path carries what it reports. Walked with a stack, not
 * recursion, so that the walk itself cannot overflow.
 */
export function inputIssues(value: unknown): InputIssue[] {
  const found = new Map<string, InputIssue>();
  const add = (path: string, message: string) =>
    found.set(`${path}\n${message}`, { path, message });
  const at = (path: string, key: string) => (path ? `${path}.${key}` : key);
  // Each entry: a value, its path, and how many objects and arrays hold it.
  const stack: [unknown, string, number][] = [[value, "", 0]];
  for (let next = stack.pop(); next; next = stack.pop()) {
    const [item, path, depth] = next;
    if (typeof item === "string") {
      const fault = textFault(item);
      if (fault) add(path, fault);
    } else if (item !== null && typeof item === "object") {
      if (depth >= MAX_JSON_DEPTH) {
        add(path, DEPTH_MESSAGE);
        continue;
      }
      // Arrays too: their entries are keyed "0", "1", …
      for (const [key, v] of Object.entries(item)) {
        const fault = textFault(key);
        if (fault) add(path, fault);
        stack.push([v, fault ? path : at(path, key), depth + 1]);
      }
    }
  }
  return [...found].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, issue]) => issue);
}

/** Throws a 400 `validation_failed` naming every place in the request part that is not fit. */
export function refuseUnfitInput(target: string, value: unknown): void {
  const issues = inputIssues(value);
  if (issues.length === 0) return;
  const location = locationOf(target);
  throw new InvalidRequestError(issues.map((issue) => ({ location, ...issue })));
}
