// Frames the CLI's stdout into lines and parses each as JSON.
//
// Work is on bytes: chunks are kept in a list (never re-concatenated while a line grows, so the
// cost is linear in the input), a line is decoded as UTF-8 only once it is whole (a character
// split across chunks decodes correctly), and every line is bounded in bytes. A line over the
// bound is dropped, counted and reported, and framing resumes after its `\n`. A line over
// `longLine.overBytes` that starts with `longLine.startingWith` has its strings cut as it arrives
// (see json-cutter.ts); any other line is kept whole up to the bound.

import { JsonStringCutter } from "./json-cutter.js";

export interface LineFramerOptions {
  /** Longest accepted line in bytes, without its `\n`. */
  maxLineBytes: number;
  /** Called once per dropped line with its length in bytes (as far as it was read). */
  onOversized?: (bytes: number) => void;
  /** Lines are JSON, and in one longer than `overBytes` strings keep `maxStringBytes`. */
  longLine?: LongLine;
}

export interface LongLine {
  overBytes: number;
  maxStringBytes: number;
  /** Only a line that starts with this is cut (every long line when absent). */
  startingWith?: string;
}

const NEWLINE = 0x0a;

export class LineFramer {
  private readonly maxLineBytes: number;
  private readonly onOversized: ((bytes: number) => void) | undefined;
  private readonly longLine: LongLine | undefined;
  private readonly cutPrefix: Buffer | undefined;
  private parts: Buffer[] = [];
  private size = 0;
  /** The current line's cutter, once the line is long (and one to cut). */
  private cutter: JsonStringCutter | undefined;
  /** The current line is long but not one to cut. */
  private keptWhole = false;
  /** Inside an over-long line: bytes are discarded up to the next `\n`. */
  private skipping = false;
  private skipped = 0;
  /** Lines dropped for being longer than the bound. */
  oversizedLines = 0;

  constructor(options: LineFramerOptions) {
    this.maxLineBytes = options.maxLineBytes;
    this.onOversized = options.onOversized;
    this.longLine = options.longLine;
    const prefix = options.longLine?.startingWith;
    this.cutPrefix = prefix === undefined ? undefined : Buffer.from(prefix);
  }

  /** Feeds one chunk; returns the lines it completed, decoded, without their `\n`. */
  push(chunk: Buffer): string[] {
    const lines: string[] = [];
    const last = chunk.lastIndexOf(NEWLINE);
    let start = 0;
    while (start < chunk.length) {
      // The common case: the lines that start and end within the chunk, all within the bounds
      // (the span they fill is), are decoded in one go and split, rather than found and decoded
      // one at a time; no view of a line, no list of parts to collect (a quarter of the relay's
      // CPU once went to the collector). A `\n` byte is never part of a longer UTF-8 character.
      if (last >= start && this.size === 0 && !this.skipping && this.takesWhole(last - start)) {
        for (const line of chunk.toString("utf8", start, last).split("\n")) lines.push(line);
        start = last + 1;
        continue;
      }
      const nl = chunk.indexOf(NEWLINE, start);
      // Else a line whole within the chunk is decoded straight from it.
      if (nl !== -1 && this.size === 0 && !this.skipping && this.takesWhole(nl - start)) {
        lines.push(chunk.toString("utf8", start, nl));
        start = nl + 1;
        continue;
      }
      const end = nl === -1 ? chunk.length : nl;
      this.take(chunk.subarray(start, end));
      if (nl === -1) break;
      const line = this.finishLine();
      if (line !== undefined) lines.push(line);
      start = nl + 1;
    }
    return lines;
  }

  /** Whether a line of this many bytes is kept as it is: not over the bound, nor one to cut. */
  private takesWhole(bytes: number): boolean {
    return bytes <= this.maxLineBytes && !(this.longLine && bytes > this.longLine.overBytes);
  }

  /** Ends the input: a last line without `\n` is returned if it is within the bound. */
  end(): string[] {
    if (this.size === 0 && !this.skipping) return [];
    const line = this.finishLine();
    return line === undefined ? [] : [line];
  }

  private take(segment: Buffer): void {
    if (segment.length === 0) return;
    if (this.skipping) {
      this.skipped += segment.length;
      return;
    }
    if (this.size + segment.length > this.maxLineBytes) {
      // Over the bound: forget what we hold and discard the rest of this line as it arrives.
      this.skipping = true;
      this.skipped = this.size + segment.length;
      this.parts = [];
      this.size = 0;
      this.cutter = undefined;
      this.keptWhole = false;
      return;
    }
    this.size += segment.length;
    if (this.cutter) {
      this.cutter.push(segment);
      return;
    }
    this.parts.push(segment);
    if (this.longLine && !this.keptWhole && this.size > this.longLine.overBytes) {
      if (this.startsWithCutPrefix()) {
        this.cutter = new JsonStringCutter(this.longLine.maxStringBytes);
        for (const part of this.parts) this.cutter.push(part);
        this.parts = [];
      } else {
        this.keptWhole = true;
      }
    }
  }

  private startsWithCutPrefix(): boolean {
    const prefix = this.cutPrefix;
    if (prefix === undefined) return true;
    let offset = 0;
    for (const part of this.parts) {
      const n = Math.min(part.length, prefix.length - offset);
      if (prefix.compare(part, 0, n, offset, offset + n) !== 0) return false;
      offset += n;
      if (offset === prefix.length) return true;
    }
    return false;
  }

  private finishLine(): string | undefined {
    if (this.skipping) {
      this.oversizedLines++;
      this.onOversized?.(this.skipped);
      this.skipping = false;
      this.skipped = 0;
      return undefined;
    }
    const { parts, size, cutter } = this;
    this.parts = [];
    this.size = 0;
    this.cutter = undefined;
    this.keptWhole = false;
    if (cutter) return cutter.finish().toString("utf8");
    const bytes = parts.length === 1 && parts[0] ? parts[0] : Buffer.concat(parts, size);
    return bytes.toString("utf8");
  }
}

export interface NdjsonReaderOptions extends LineFramerOptions {
  /** Called for each line that is not a JSON object (it is skipped). */
  onInvalid?: (preview: string, reason: string) => void;
  /** Sees every line as framed, before it is parsed: bounded as the framer bounds it. */
  onLine?: (line: string) => void;
  /** Reads a line as JSON.parse does, throwing as it throws (default: JSON.parse). */
  parse?: (line: string) => unknown;
}

/** A LineFramer whose lines are parsed as JSON objects; blank lines are ignored. */
export class NdjsonReader {
  private readonly framer: LineFramer;
  private readonly onInvalid: ((preview: string, reason: string) => void) | undefined;
  private readonly onLine: ((line: string) => void) | undefined;
  private readonly parseLine: (line: string) => unknown;
  /** Lines skipped because they were not JSON objects. */
  invalidLines = 0;

  constructor(options: NdjsonReaderOptions) {
    this.framer = new LineFramer(options);
    this.onInvalid = options.onInvalid;
    this.onLine = options.onLine;
    this.parseLine = options.parse ?? JSON.parse;
  }

  get oversizedLines(): number {
    return this.framer.oversizedLines;
  }

  push(chunk: Buffer): Record<string, unknown>[] {
    return this.parse(this.framer.push(chunk));
  }

  end(): Record<string, unknown>[] {
    return this.parse(this.framer.end());
  }

  private parse(lines: string[]): Record<string, unknown>[] {
    const out: Record<string, unknown>[] = [];
    for (const line of lines) {
      if (line.trim().length === 0) continue;
      this.onLine?.(line);
      let value: unknown;
      try {
        value = this.parseLine(line);
      } catch (err) {
        this.invalid(line, err instanceof Error ? err.message : String(err));
        continue;
      }
      if (typeof value === "object" && value !== null && !Array.isArray(value)) {
        out.push(value as Record<string, unknown>);
      } else {
        this.invalid(line, "not a JSON object");
      }
    }
    return out;
  }

  private invalid(line: string, reason: string): void {
    this.invalidLines++;
    this.onInvalid?.(line.length > 200 ? `${line.slice(0, 200)}…` : line, reason);
  }
}
