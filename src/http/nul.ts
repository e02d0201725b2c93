import { invalidRequest, locationOf } from "./errors.js";

// Postgres and PGlite refuse U+0000 in text and jsonb columns, so a NUL anywhere in a request
// would fail its insert (a 500). No field of the API needs one: every string a client sends,
// free-form JSON included, is refused with a 400 naming where the NUL is.

export const NUL_MESSAGE = "must not contain U+0000 (NUL)";

/**
 * The path of each string in `value` that holds U+0000 (`metadata.ticket`, `events.1`); a key
 * holding one is reported at its object's path. Walked with a stack, not recursion, so that a
 * deeply nested payload cannot overflow the call stack.
 */
export function nulPaths(value: unknown): string[] {
  const found: string[] = [];
  const stack: [unknown, string][] = [[value, ""]];
  const at = (path: string, key: string) => (path ? `${path}.${key}` : key);
  for (let next = stack.pop(); next; next = stack.pop()) {
    const [item, path] = next;
    if (typeof item === "string") {
      if (item.includes("\u0000")) found.push(path);
    } else if (item !== null && typeof item === "object") {
      // Arrays too: their entries are keyed "0", "1", …
      for (const [key, v] of Object.entries(item)) {
        if (key.includes("\u0000")) found.push(path);
        stack.push([v, at(path, key)]);
      }
    }
  }
  return [...new Set(found)].sort();
}

/** Throws a 400 `validation_failed` naming every place in the request part that holds a NUL. */
export function refuseNul(target: string, value: unknown): void {
  const paths = nulPaths(value);
  if (paths.length === 0) return;
  const location = locationOf(target);
  throw invalidRequest(paths.map((path) => ({ location, path, message: NUL_MESSAGE })));
}
