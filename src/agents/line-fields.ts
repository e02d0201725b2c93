// Reading the fields of an agent CLI's parsed output lines, for the back-ends' mappers: a line is
// untrusted JSON, so every field is checked for its type before use.

export type Json = Record<string, unknown>;

/** Longest `tool_result` content in characters; longer content is cut and marked truncated. */
export const DEFAULT_MAX_TOOL_RESULT_CHARS = 16_384;

export function isRecord(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export function str(value: unknown): string | undefined {
  return typeof value === "string" ? value : undefined;
}

/** A finite number rounded to an integer; anything else counts as 0. */
export function int(value: unknown): number {
  return typeof value === "number" && Number.isFinite(value) ? Math.round(value) : 0;
}

/** `text` cut to at most `max` characters, never splitting a surrogate pair. */
export function cut(text: string, max: number): { content: string; truncated: boolean } {
  if (text.length <= max) return { content: text, truncated: false };
  let end = max;
  const code = text.charCodeAt(end - 1);
  if (code >= 0xd800 && code <= 0xdbff) end--;
  return { content: text.slice(0, end), truncated: true };
}
