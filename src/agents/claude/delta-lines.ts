import type { Json } from "../line-fields.js";

// The CLI's most frequent line, a streamed delta, read without JSON.parse's generic walk.
//
// With --include-partial-messages the CLI writes one `stream_event` line per token it streams,
// always in the one shape below (test/fixtures/stream-json/ holds its output), and parsing those
// lines was the largest part of a long answer's CPU in the bridge (`npm run bench -- --profile`).
// A line whose every byte matches that shape is taken apart by one regular expression and built
// into the very object JSON.parse makes of it: the same keys in the same order, its strings
// decoded by JSON.parse itself whenever they hold an escape. Whatever differs in the slightest
// (whitespace, another key, a number JSON would refuse, a control character in a string) falls
// to JSON.parse, so a line never reads otherwise than JSON.parse reads it.

/**
 * What stands between a JSON string literal's quotes, exactly as JSON's grammar has it: runs of
 * plain characters between escapes (an escape starts with a character no run holds, so a literal
 * matches one way only, and a line that is not one fails in time linear in its length).
 */
const PLAIN = String.raw`[^"\\\u0000-\u001f]*`;
const CHARACTERS = String.raw`${PLAIN}(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})${PLAIN})*`;
/** A string literal, its characters captured. */
const STRING = `"(${CHARACTERS})"`;

const DELTA_LINE = new RegExp(
  [
    String.raw`^\{"type":"stream_event","event":\{"type":"content_block_delta",`,
    `"index":(0|[1-9][0-9]{0,14}),`,
    String.raw`"delta":\{"type":"(text_delta|input_json_delta|thinking_delta)","(text|partial_json|thinking)":${STRING}\}\},`,
    `"session_id":${STRING},"parent_tool_use_id":(?:null|${STRING}),"uuid":${STRING}`,
    String.raw`(?:,"thinking_display":${STRING})?(?:,"api_message_id":${STRING})?\}$`,
  ].join(""),
);

/**
 * Lines longer than this go to JSON.parse: a delta is a few tokens (the CLI's are about 250
 * characters), and on a long string dense with escapes the expression and the decoding of its
 * captures take about twice JSON.parse's time.
 */
const MAX_FAST_CHARS = 4 * 1024;

/** A matched literal's value: its characters themselves when they hold no escape. */
const decoded = (characters: string): string =>
  characters.includes("\\") ? (JSON.parse(`"${characters}"`) as string) : characters;

/** The line as JSON.parse reads it, when it is a delta line of the CLI's shape; else undefined. */
export function deltaLine(line: string): Json | undefined {
  if (line.length > MAX_FAST_CHARS) return undefined;
  const m = DELTA_LINE.exec(line);
  if (!m) return undefined;
  // Read by index and built from literals: destructuring the match and a computed key took as
  // long as the expression itself (`npm run bench`, docs/performance.md). Only the parent's, the
  // display's and the API message id's groups can be absent from a match.
  const deltaType = m[2] as string;
  const key = m[3];
  const value = decoded(m[4] as string);
  const parent = m[6];
  const display = m[8];
  const apiMessageId = m[9];
  const delta: Json =
    key === "text"
      ? { type: deltaType, text: value }
      : key === "thinking"
        ? { type: deltaType, thinking: value }
        : { type: deltaType, partial_json: value };
  const parsed: Json = {
    type: "stream_event",
    event: { type: "content_block_delta", index: Number(m[1]), delta },
    session_id: decoded(m[5] as string),
    parent_tool_use_id: parent === undefined ? null : decoded(parent),
    uuid: decoded(m[7] as string),
  };
  if (display !== undefined) parsed.thinking_display = decoded(display);
  if (apiMessageId !== undefined) parsed.api_message_id = decoded(apiMessageId);
  return parsed;
}

/** One line of the CLI's stdout, as JSON.parse reads it (and throws as it throws). */
export const parseClaudeLine = (line: string): unknown => deltaLine(line) ?? JSON.parse(line);
