import { describe, expect, it } from "vitest";
import { CLAUDE_LONG_LINE } from "../../src/agents/claude/long-line.js";
import { LineFramer, NdjsonReader } from "../../src/process/framer.js";

const MB = 1024 * 1024;

function reader(maxLineBytes = 1024) {
  const invalid: string[] = [];
  const oversized: number[] = [];
  // Claude's cut of long lines: the driver gives the reader its agent's (AgentCommand.longLine).
  const r = new NdjsonReader({
    maxLineBytes,
    longLine: CLAUDE_LONG_LINE,
    onInvalid: (preview) => invalid.push(preview),
    onOversized: (bytes) => oversized.push(bytes),
  });
  return { r, invalid, oversized };
}

describe("LineFramer / NdjsonReader", () => {
  it("returns several objects that arrive in one chunk", () => {
    const { r } = reader();
    expect(r.push(Buffer.from('{"a":1}\n{"b":2}\n{"c":3}\n'))).toEqual([
      { a: 1 },
      { b: 2 },
      { c: 3 },
    ]);
  });

  it("reassembles one object split across reads", () => {
    const { r } = reader();
    expect(r.push(Buffer.from('{"text":"hel'))).toEqual([]);
    expect(r.push(Buffer.from("lo wor"))).toEqual([]);
    expect(r.push(Buffer.from('ld"}\n{"n"'))).toEqual([{ text: "hello world" }]);
    expect(r.push(Buffer.from(":2}\n"))).toEqual([{ n: 2 }]);
  });

  it("frames a chunk's whole lines together between a line begun before it and one it begins, multibyte characters and blank lines among them", () => {
    const framer = new LineFramer({ maxLineBytes: 1024 });
    const bytes = Buffer.from("end of é\n漢字\n\n😀 two\nthe next ");
    expect(framer.push(Buffer.from("a line: "))).toEqual([]);
    expect(framer.push(bytes)).toEqual(["a line: end of é", "漢字", "", "😀 two"]);
    expect(framer.push(Buffer.from("one\n"))).toEqual(["the next one"]);
    // Split inside each character in turn: the lines read the same.
    for (let at = 1; at < bytes.length; at++) {
      const split = new LineFramer({ maxLineBytes: 1024 });
      const lines = [
        ...split.push(bytes.subarray(0, at)),
        ...split.push(bytes.subarray(at)),
        ...split.end(),
      ];
      expect(lines, `split at byte ${at}`).toEqual(["end of é", "漢字", "", "😀 two", "the next "]);
    }
  });

  it("decodes a multibyte character split across chunks correctly", () => {
    const { r } = reader();
    const bytes = Buffer.from('{"t":"é漢😀"}\n');
    // Feed one byte at a time: every multibyte character is split.
    const out = [];
    for (const b of bytes) out.push(...r.push(Buffer.from([b])));
    expect(out).toEqual([{ t: "é漢😀" }]);
  });

  it("reads each line with the agent's own parse when it has one, and skips a line that parse refuses", () => {
    const invalid: string[] = [];
    const r = new NdjsonReader({
      maxLineBytes: 1024,
      onInvalid: (preview, reason) => invalid.push(`${preview}: ${reason}`),
      parse: (line) => {
        if (line === "refused") throw new SyntaxError("not a line of ours");
        return { read: line };
      },
    });
    expect(r.push(Buffer.from("plain text\nrefused\n{}\n"))).toEqual([
      { read: "plain text" },
      { read: "{}" },
    ]);
    expect(invalid).toEqual(["refused: not a line of ours"]);
  });

  it("returns a final line without newline at end of input", () => {
    const { r } = reader();
    expect(r.push(Buffer.from('{"a":1}\n{"last":true}'))).toEqual([{ a: 1 }]);
    expect(r.end()).toEqual([{ last: true }]);
  });

  it("counts a truncated final line as invalid instead of returning it", () => {
    const { r, invalid } = reader();
    r.push(Buffer.from('{"a":1}\n{"cut":'));
    expect(r.end()).toEqual([]);
    expect(r.invalidLines).toBe(1);
    expect(invalid).toEqual(['{"cut":']);
  });

  it("drops an over-long line, reports its size, and frames the next line normally", () => {
    const { r, oversized } = reader(100);
    const long = `{"x":"${"y".repeat(300)}"}`;
    // The long line arrives in pieces, the next line starts in the same chunk as its end.
    expect(r.push(Buffer.from(long.slice(0, 50)))).toEqual([]);
    expect(r.push(Buffer.from(long.slice(50, 200)))).toEqual([]);
    expect(r.push(Buffer.from(`${long.slice(200)}\n{"ok":1}\n`))).toEqual([{ ok: 1 }]);
    expect(r.oversizedLines).toBe(1);
    expect(oversized).toEqual([long.length]);
  });

  it("measures the bound in bytes, not characters", () => {
    const framer = new LineFramer({ maxLineBytes: 10 });
    // 5 characters, 10 bytes: fits exactly; 6 characters (12 bytes) does not.
    expect(framer.push(Buffer.from("ééééé\néééééé\nok\n"))).toEqual(["ééééé", "ok"]);
    expect(framer.oversizedLines).toBe(1);
  });

  it("drops a line over the bound among short lines of one chunk, and keeps the short ones", () => {
    const framer = new LineFramer({ maxLineBytes: 10 });
    expect(framer.push(Buffer.from("short\nthis line is too long\nok\nand a rest"))).toEqual([
      "short",
      "ok",
    ]);
    expect(framer.oversizedLines).toBe(1);
    expect(framer.end()).toEqual(["and a rest"]);
  });

  it("drops an over-long final line without newline", () => {
    const framer = new LineFramer({ maxLineBytes: 4 });
    framer.push(Buffer.from("123456"));
    expect(framer.end()).toEqual([]);
    expect(framer.oversizedLines).toBe(1);
  });

  it("skips garbage lines with a count and keeps the JSON lines around them", () => {
    const { r, invalid } = reader();
    const out = r.push(Buffer.from('not json\n{"a":1}\n[1,2]\n42\n\n   \n{"b":2}\n{broken\n'));
    expect(out).toEqual([{ a: 1 }, { b: 2 }]);
    // Blank lines are not counted; non-objects are.
    expect(r.invalidLines).toBe(4);
    expect(invalid).toEqual(["not json", "[1,2]", "42", "{broken"]);
  });

  it("keeps the first MiB of each string of a line over 4 MiB, and shorter lines whole", () => {
    const { r } = reader(32 * MB);
    const line = (value: object) => Buffer.from(`${JSON.stringify(value)}\n`);
    const bytes = Buffer.concat([
      line({ type: "user", text: "z".repeat(20 * MB), tool_use_result: "y".repeat(2 * MB), n: 1 }),
      line({ type: "user", text: "x".repeat(3 * MB) }),
    ]);
    const out = [];
    for (let i = 0; i < bytes.length; i += 64 * 1024)
      out.push(...r.push(bytes.subarray(i, i + 64 * 1024)));
    expect(out).toEqual([
      { type: "user", text: "z".repeat(MB), tool_use_result: "y".repeat(MB), n: 1 },
      { type: "user", text: "x".repeat(3 * MB) },
    ]);
  });

  it("keeps whole a long line with text the user reads (not a user line), up to the bound", () => {
    const { r, oversized } = reader(16 * MB);
    const text = "t".repeat(12 * MB);
    const lines = [
      { type: "assistant", message: { content: [{ type: "text", text }] } },
      { subtype: "success", type: "result", result: text },
      { type: "stream_event", event: { delta: { type: "text_delta", text } } },
    ];
    const bytes = Buffer.concat(lines.map((l) => Buffer.from(`${JSON.stringify(l)}\n`)));
    const out = [];
    for (let i = 0; i < bytes.length; i += 64 * 1024)
      out.push(...r.push(bytes.subarray(i, i + 64 * 1024)));
    expect(out).toEqual(lines);
    expect(oversized).toEqual([]);
  });

  it("cuts a long user line whose prefix arrives split over several chunks", () => {
    const { r } = reader(32 * MB);
    const bytes = Buffer.from(`${JSON.stringify({ type: "user", text: "z".repeat(5 * MB) })}\n`);
    const out = [...r.push(bytes.subarray(0, 3)), ...r.push(bytes.subarray(3, 9))];
    out.push(...r.push(bytes.subarray(9)));
    expect(out).toEqual([{ type: "user", text: "z".repeat(MB) }]);
  });

  it("frames 50 MB in 64 KiB chunks by keeping chunk lists (linear, no regrowing buffer)", () => {
    // A 50 MB line in 800 chunks: a framer that re-concatenated its growing tail on every chunk
    // would copy ~20 GB here; this one copies each byte once, when the line is complete.
    const framer = new LineFramer({ maxLineBytes: 64 * MB });
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    let lines = 0;
    for (let i = 0; i < 800; i++) lines += framer.push(chunk).length;
    const rest = framer.push(Buffer.from("\nsmall\n"));
    expect(lines).toBe(0);
    expect(rest).toHaveLength(2);
    expect(rest[0]?.length).toBe(800 * 64 * 1024);
    expect(rest[1]).toBe("small");
  });

  it("handles CRLF line endings", () => {
    const { r } = reader();
    expect(r.push(Buffer.from('{"a":1}\r\n{"b":2}\r\n'))).toEqual([{ a: 1 }, { b: 2 }]);
  });
});
