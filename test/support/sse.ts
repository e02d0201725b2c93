// Reads an SSE response body frame by frame, keeping the exact wire text, so tests can assert
// both the format and the events. Deliberately simple: our server writes one field per line.

export interface Frame {
  id?: string;
  event?: string;
  data?: unknown;
  comment?: string;
  raw: string;
}

export class SseReader {
  private buffer = "";
  private readonly decoder = new TextDecoder();
  readonly raw: string[] = [];

  constructor(private readonly reader: ReadableStreamDefaultReader<Uint8Array>) {}

  static of(res: Response): SseReader {
    if (!res.body) throw new Error("response has no body");
    return new SseReader(res.body.getReader());
  }

  /** The next frame, or undefined when the stream has ended. */
  async next(): Promise<Frame | undefined> {
    for (;;) {
      const end = this.buffer.indexOf("\n\n");
      if (end >= 0) {
        const raw = this.buffer.slice(0, end + 2);
        this.buffer = this.buffer.slice(end + 2);
        this.raw.push(raw);
        return parseFrame(raw);
      }
      const { value, done } = await this.reader.read();
      if (done) return undefined;
      this.buffer += this.decoder.decode(value, { stream: true });
    }
  }

  /** Event frames (comments skipped) until `n` are read or the stream ends. */
  async events(n = Number.POSITIVE_INFINITY): Promise<Frame[]> {
    const frames: Frame[] = [];
    while (frames.length < n) {
      const frame = await this.next();
      if (!frame) break;
      if (frame.event) frames.push(frame);
    }
    return frames;
  }

  /** Event frames up to and including the first of `type`; throws when the stream ends first. */
  async until(type: string): Promise<Frame[]> {
    const frames: Frame[] = [];
    for (;;) {
      const [frame] = await this.events(1);
      if (!frame) throw new Error(`the stream ended before a ${type} event`);
      frames.push(frame);
      if (frame.event === type) return frames;
    }
  }

  /** True when the server has closed the stream (no more bytes). */
  async ended(): Promise<boolean> {
    return (await this.next()) === undefined;
  }

  cancel(): Promise<void> {
    return this.reader.cancel();
  }
}

function parseFrame(raw: string): Frame {
  const frame: Frame = { raw };
  for (const line of raw.split("\n")) {
    if (line.startsWith(":")) frame.comment = line.slice(1).trim();
    else if (line.startsWith("id: ")) frame.id = line.slice(4);
    else if (line.startsWith("event: ")) frame.event = line.slice(7);
    else if (line.startsWith("data: ")) frame.data = JSON.parse(line.slice(6));
  }
  return frame;
}

/** What two streams must agree on, frame by frame: ids, events and data. */
export const wire = (frames: Frame[]) => frames.map((f) => [f.id, f.event, f.data]);
