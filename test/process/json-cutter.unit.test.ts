import { describe, expect, it } from "vitest";
import { JsonStringCutter } from "../../src/process/json-cutter.js";

// The cutter copies JSON as it arrives, cutting long strings. Checked against random documents
// (strings with escapes, control characters, 2- to 4-byte UTF-8) fed in random chunk sizes.

/** A small seeded generator (mulberry32), so that a failure can be replayed. */
function random(seed: number) {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const ALPHABET = ["a", "b", " ", '"', "\\", "\n", "\u0001", "/", "é", "漢", "😀", "u", "1"];

function randomString(rand: () => number, maxLength: number): string {
  let s = "";
  const length = Math.floor(rand() * maxLength);
  for (let i = 0; i < length; i++) s += ALPHABET[Math.floor(rand() * ALPHABET.length)];
  return s;
}

function randomValue(rand: () => number, depth: number): unknown {
  const pick = rand();
  if (depth > 3 || pick < 0.4) return randomString(rand, 60);
  if (pick < 0.5) return Math.floor(rand() * 1e6) / 100;
  if (pick < 0.55) return rand() < 0.5 ? null : true;
  if (pick < 0.75)
    return Array.from({ length: Math.floor(rand() * 4) }, () => randomValue(rand, depth + 1));
  const object: Record<string, unknown> = {};
  for (let i = Math.floor(rand() * 4); i > 0; i--) object[`k${i}`] = randomValue(rand, depth + 1);
  return object;
}

function cutInChunks(text: Buffer, maxStringBytes: number, rand: () => number): Buffer {
  const cutter = new JsonStringCutter(maxStringBytes);
  for (let i = 0; i < text.length; ) {
    const size = 1 + Math.floor(rand() * 40);
    cutter.push(text.subarray(i, i + size));
    i += size;
  }
  return cutter.finish();
}

/** `cut` is `original` with each string a prefix of the original's, whole when it was short. */
function expectCutFrom(original: unknown, cut: unknown, maxStringBytes: number) {
  if (typeof original === "string") {
    expect(typeof cut).toBe("string");
    const written = Buffer.byteLength(JSON.stringify(original)) - 2;
    if (written <= maxStringBytes) expect(cut).toBe(original);
    else {
      expect(original.startsWith(cut as string)).toBe(true);
      // Cut at the first character boundary at or after the bound (an escape is at most 6 bytes).
      const kept = Buffer.byteLength(JSON.stringify(cut)) - 2;
      expect(kept).toBeGreaterThanOrEqual(maxStringBytes);
      expect(kept).toBeLessThan(maxStringBytes + 6);
    }
  } else if (Array.isArray(original)) {
    expect(cut).toHaveLength(original.length);
    for (const [i, item] of original.entries())
      expectCutFrom(item, (cut as unknown[])[i], maxStringBytes);
  } else if (original !== null && typeof original === "object") {
    expect(Object.keys(cut as object)).toEqual(Object.keys(original));
    for (const [key, value] of Object.entries(original))
      expectCutFrom(value, (cut as Record<string, unknown>)[key], maxStringBytes);
  } else expect(cut).toBe(original);
}

describe("JsonStringCutter", () => {
  it("copies a document whose strings are within the bound byte for byte", () => {
    const rand = random(1);
    for (let n = 0; n < 200; n++) {
      const text = Buffer.from(JSON.stringify(randomValue(rand, 0)));
      expect(cutInChunks(text, 1000, rand).equals(text)).toBe(true);
    }
  });

  it("cuts each long string at a character boundary into valid JSON, in any chunking", () => {
    const rand = random(2);
    let cuts = 0;
    for (let n = 0; n < 2000; n++) {
      const value = randomValue(rand, 0);
      // Keys (`k1`...) are 2 bytes: within every bound here.
      const maxStringBytes = 2 + Math.floor(rand() * 30);
      const text = cutInChunks(Buffer.from(JSON.stringify(value)), maxStringBytes, rand);
      expectCutFrom(value, JSON.parse(text.toString("utf8")), maxStringBytes);
      cuts += Number(!text.equals(Buffer.from(JSON.stringify(value))));
    }
    expect(cuts).toBeGreaterThan(500);
  });

  it("finds the end of a cut string past escaped quotes and backslash runs split across chunks", () => {
    const long = `${'\\"'.repeat(50)}${"\\\\".repeat(51)}\\"end`;
    const text = Buffer.from(JSON.stringify({ long, after: "intact", n: [1, 2] }));
    const cutter = new JsonStringCutter(8);
    for (const byte of text) cutter.push(Buffer.from([byte]));
    expect(JSON.parse(cutter.finish().toString("utf8"))).toEqual({
      long: long.slice(0, 4),
      after: "intact",
      n: [1, 2],
    });
  });

  it("starts afresh after finish, even when the text ended inside a cut string", () => {
    const cutter = new JsonStringCutter(4);
    cutter.push(Buffer.from('["abcdefgh","ab","xyzxyzxyz"]'));
    expect(cutter.finish().toString()).toBe('["abcd","ab","xyzx"]');
    cutter.push(Buffer.from('{"k":"vvvvvvv'));
    expect(cutter.finish().toString()).toBe('{"k":"vvvv');
    cutter.push(Buffer.from('{"k":"v"}'));
    expect(cutter.finish().toString()).toBe('{"k":"v"}');
  });
});
