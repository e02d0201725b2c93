import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { deltaLine, parseClaudeLine } from "../../../src/agents/claude/delta-lines.js";

const fixtures = join(import.meta.dirname, "../../fixtures/stream-json");
/** Every line the real CLI wrote in the fixtures. */
const realLines = readdirSync(fixtures)
  .filter((name) => name.endsWith(".ndjson"))
  .flatMap((name) => readFileSync(join(fixtures, name), "utf8").split("\n"))
  .filter((line) => line.length > 0);
/** Its streamed text, tool input and thinking: a delta line for each few tokens. */
const STREAMED = /"delta":\{"type":"(text|input_json|thinking)_delta"/;
const realDeltas = realLines.filter((line) => STREAMED.test(line));

/** A text delta line of the real CLI's shape, its text's literal as given. */
const textLine = (literal: string, tail = ',"api_message_id":"msg_1"') =>
  `{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":${literal}}},"session_id":"f7fb2e3b-8cfd-4d69-983f-c3ec3187ad98","parent_tool_use_id":null,"uuid":"0f847771-f338-461a-8068-cef2577f4989"${tail}}`;

/** parseClaudeLine reads `line` as JSON.parse does: the same value, keys in the same order, or the same refusal. */
function expectReadAsJsonParse(line: string) {
  let expected: unknown;
  try {
    expected = JSON.parse(line);
  } catch (err) {
    expect(() => parseClaudeLine(line), line).toThrow(SyntaxError);
    expect(deltaLine(line), line).toBeUndefined();
    return err;
  }
  const read = parseClaudeLine(line);
  expect(read, line).toStrictEqual(expected);
  expect(JSON.stringify(read), line).toBe(JSON.stringify(expected));
  return undefined;
}

/** A deterministic generator, so that a failure names the same line each time. */
function random(seed: number) {
  let state = seed;
  return () => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    return state / 2 ** 32;
  };
}

// Characters JSON treats apart: quotes, backslashes, control characters, the line separators
// JavaScript once did not allow in strings, surrogate halves and pairs, and the escapes' letters.
const TRICKY = [
  '"',
  "\\",
  "/",
  "\u0000",
  "\u0008",
  "\n",
  "\u001f",
  "\u007f",
  "\u2028",
  "\u2029",
  "\ud800",
  "\udfff",
  "😀",
  "é",
  "u",
  "b",
  "0",
  "a",
  " ",
  "}",
  ",",
];

describe("the CLI's delta lines", () => {
  it("takes every text, tool input and thinking delta the real CLI wrote apart by its shape, into what JSON.parse makes of it", () => {
    expect(realDeltas.length).toBeGreaterThan(100);
    for (const line of realDeltas) {
      expect(deltaLine(line), line).toBeDefined();
      expectReadAsJsonParse(line);
    }
  });

  it("reads every other line the real CLI wrote by JSON.parse", () => {
    for (const line of realLines) {
      if (!STREAMED.test(line)) expect(deltaLine(line), line).toBeUndefined();
      expectReadAsJsonParse(line);
    }
  });

  it("reads text with any characters, escaped as JSON escapes them, by its shape and as JSON.parse does", () => {
    const next = random(43);
    for (let i = 0; i < 3000; i++) {
      const text = Array.from(
        { length: Math.floor(next() * 12) },
        () => TRICKY[Math.floor(next() * TRICKY.length)],
      ).join("");
      const line = textLine(JSON.stringify(text));
      expect(deltaLine(line), line).toBeDefined();
      expectReadAsJsonParse(line);
    }
    // Escapes JSON.stringify never writes, but JSON allows.
    for (const literal of [
      String.raw`"\/\u00e9\uD83D\uDE00\ud800\b\f\r\t"`,
      String.raw`"\u2028\""`,
    ]) {
      expect(deltaLine(textLine(literal))).toBeDefined();
      expectReadAsJsonParse(textLine(literal));
    }
  });

  it("reads text whose raw characters JSON refuses, or whose escapes it does not know, as JSON.parse does: it refuses the line", () => {
    const next = random(7);
    let refused = 0;
    for (let i = 0; i < 3000; i++) {
      const raw = Array.from(
        { length: 1 + Math.floor(next() * 8) },
        () => TRICKY[Math.floor(next() * TRICKY.length)],
      ).join("");
      if (expectReadAsJsonParse(textLine(`"${raw}"`))) refused++;
    }
    for (const literal of [
      String.raw`"\x41"`,
      String.raw`"\u12"`,
      String.raw`"\U0041"`,
      '"\t"',
      '"a',
    ]) {
      expect(expectReadAsJsonParse(textLine(literal))).toBeDefined();
    }
    expect(refused).toBeGreaterThan(1000);
  });

  it("reads a line that strays from the shape in any way by JSON.parse", () => {
    const strays = [
      // Numbers JSON refuses or reads apart.
      textLine('"x"').replace('"index":0', '"index":00'),
      textLine('"x"').replace('"index":0', '"index":-0'),
      textLine('"x"').replace('"index":0', '"index":1.5'),
      textLine('"x"').replace('"index":0', '"index":1e2'),
      textLine('"x"').replace('"index":0', '"index":9007199254740993'),
      // Whitespace, another order, another key, a key twice, the end cut or followed by more.
      textLine('"x"').replace('"index":0', '"index": 0'),
      ` ${textLine('"x"')}`,
      `${textLine('"x"')} `,
      textLine('"x"').replace('"type":"stream_event","event"', '"event"'),
      textLine('"x"', ',"api_message_id":"m","extra":1'),
      textLine('"x"', ',"uuid":"second"'),
      textLine('"x"').slice(0, -1),
      `${textLine('"x"')}}`,
      `${textLine('"x"')}x`,
      textLine('"x"').replace('"text":"x"', '"text":"x","more":true'),
      textLine('"x"').replace("null", "nul"),
      textLine('"x"').replace("null", "false"),
      textLine('"x"').replace('"session_id":"f7fb', '"session_id":"\u0001f7fb'),
    ];
    for (const line of strays) {
      expect(deltaLine(line), line).toBeUndefined();
      expectReadAsJsonParse(line);
    }
  });

  it("takes the shape's variants: a subagent's parent, thinking with its display, no API message id", () => {
    const variants = [
      textLine('"x"').replace('"parent_tool_use_id":null', '"parent_tool_use_id":"toolu_1\\n"'),
      textLine('"x"').replace('"parent_tool_use_id":null', '"parent_tool_use_id":""'),
      textLine('"x"', ',"thinking_display":"updates","api_message_id":"msg_1"').replace(
        '"type":"text_delta","text"',
        '"type":"thinking_delta","thinking"',
      ),
      textLine('"x"', ""),
      textLine('"{\\"path\\": \\"a\\"}"').replace(
        '"type":"text_delta","text"',
        '"type":"input_json_delta","partial_json"',
      ),
    ];
    for (const line of variants) {
      expect(deltaLine(line), line).toBeDefined();
      expectReadAsJsonParse(line);
    }
  });

  it("leaves a line over its bound to JSON.parse, and takes a long one of many escapes in one pass", () => {
    const long = textLine(JSON.stringify('\\"é\n'.repeat(3000)));
    expect(long.length).toBeGreaterThan(4 * 1024);
    expect(deltaLine(long)).toBeUndefined();
    expectReadAsJsonParse(long);
    const within = textLine(JSON.stringify('\\"é\n'.repeat(250)));
    expect(deltaLine(within)).toBeDefined();
    expectReadAsJsonParse(within);
    // A literal that never closes fails after one pass over it, not after trying every split.
    expect(deltaLine(textLine(`"${"a\\n".repeat(1000)}`))).toBeUndefined();
  });
});
