// Copies one JSON text, chunk by chunk as it arrives, with every string value cut to its first
// `maxStringBytes` bytes (as written, escapes included). The framer uses it for very long lines:
// the CLI writes a big tool output whole into one line (twice: the message and `tool_use_result`),
// and the bridge keeps only the start of it (a `tool_result` event holds 16 384 characters). Cut
// as it arrives, such a line costs neither its size in memory nor a parse of all of it, which
// held up the event loop of every run (`npm run bench`, "A 64 MB line").
//
// Only string contents are cut, at a character boundary (never inside an escape or a UTF-8
// sequence), so the result is valid JSON whenever the input is. Outside strings the text is
// copied as it is: the scan jumps from quote to quote, and reads byte by byte only the part of a
// string that is kept.

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const U = 0x75;

/** Where the scan is: between strings, in a string's kept part, or in its cut-off rest. */
type Mode = "outside" | "keeping" | "skipping";

/** In a kept string: 0 between characters, -1 after a backslash, 1..4 hex digits of `\u` to go. */
type Escape = number;

export class JsonStringCutter {
  private pieces: Buffer[] = [];
  private mode: Mode = "outside";
  private escape: Escape = 0;
  /** Bytes of the current string kept so far. */
  private kept = 0;
  /** While skipping: backslashes at the end of the previous chunk (their parity escapes a quote). */
  private backslashes = 0;

  constructor(private readonly maxStringBytes: number) {}

  push(chunk: Buffer): void {
    let copyFrom = 0;
    let i = 0;
    while (i < chunk.length) {
      if (this.mode === "outside") {
        const quote = chunk.indexOf(QUOTE, i);
        if (quote === -1) break;
        this.mode = "keeping";
        this.escape = 0;
        this.kept = 0;
        i = quote + 1;
      } else if (this.mode === "keeping") {
        i = this.keep(chunk, i, copyFrom);
      } else {
        const quote = this.closingQuote(chunk, i);
        if (quote === -1) return;
        this.mode = "outside";
        copyFrom = quote;
        i = quote + 1;
      }
    }
    if (this.mode !== "skipping") this.pieces.push(chunk.subarray(copyFrom));
  }

  /** The text with its long strings cut; the cutter is then ready for the next one. */
  finish(): Buffer {
    const text = Buffer.concat(this.pieces);
    this.pieces = [];
    this.mode = "outside";
    return text;
  }

  /**
   * Reads a kept string from `i`: returns past its closing quote (mode "outside"), at the
   * boundary where it is cut (mode "skipping", the chunk copied up to there), or the chunk's end.
   */
  private keep(chunk: Buffer, i: number, copyFrom: number): number {
    for (; i < chunk.length; i++) {
      const byte = chunk[i] as number;
      if (this.escape !== 0) {
        this.escape = this.escape === -1 ? (byte === U ? 4 : 0) : this.escape - 1;
      } else if (byte === QUOTE) {
        this.mode = "outside";
        return i + 1;
      } else if (this.kept >= this.maxStringBytes && (byte & 0xc0) !== 0x80) {
        // A character starts here (not a UTF-8 continuation byte, not inside an escape).
        this.mode = "skipping";
        this.backslashes = 0;
        this.pieces.push(chunk.subarray(copyFrom, i));
        return i;
      } else if (byte === BACKSLASH) {
        this.escape = -1;
      }
      this.kept++;
    }
    return i;
  }

  /** The index of the quote that closes the skipped string, or -1 (state kept for the next chunk). */
  private closingQuote(chunk: Buffer, from: number): number {
    for (let search = from; ; ) {
      const quote = chunk.indexOf(QUOTE, search);
      const end = quote === -1 ? chunk.length : quote;
      let run = 0;
      while (end - run > from && chunk[end - run - 1] === BACKSLASH) run++;
      if (end - run === from) run += this.backslashes;
      if (quote === -1) {
        this.backslashes = run;
        return -1;
      }
      if (run % 2 === 0) return quote;
      search = quote + 1;
    }
  }
}
