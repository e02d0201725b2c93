import { createWriteStream, mkdirSync, type WriteStream } from "node:fs";
import { join } from "node:path";
import type { BridgeEvent } from "../events.js";
import type { Logger } from "../log.js";

// AGENT_BRIDGE_DEBUG_CAPTURE: for debugging a CLI upgrade, each run's stdout lines exactly as the
// CLI wrote them (as far as the line bound lets them through) and the events the bridge made of
// them, as `<run id>.raw.jsonl` and `<run id>.events.jsonl`. Prompts, outputs and whatever the
// agent read land on disk: the files are the server user's alone (0600, in a 0700 directory).

/** One run's two capture files, opened on their first line. */
export interface RunCapture {
  /** A stdout line of the CLI. */
  rawLine(line: string): void;
  /** An event of the run; its completion closes both files. */
  event(event: BridgeEvent): void;
}

export class DebugCapture {
  /** Whether a write failure was logged already: one line for the operator, not one per run. */
  private failureLogged = false;
  /** Files of ended runs still being written. */
  private readonly closing = new Set<Promise<void>>();

  constructor(
    private readonly dir: string,
    private readonly logger: Logger,
  ) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  }

  open(runId: string): RunCapture {
    const raw = this.file(`${runId}.raw.jsonl`);
    const events = this.file(`${runId}.events.jsonl`);
    return {
      rawLine: (line) => raw.write(line),
      event: (event) => {
        events.write(JSON.stringify(event));
        if (event.type !== "completion") return;
        raw.close();
        events.close();
      },
    };
  }

  /** Lines appended to `name`; any after close (the CLI's last words after its outcome) dropped. */
  private file(name: string) {
    let stream: WriteStream | undefined;
    let closed = false;
    return {
      write: (line: string) => {
        if (closed) return;
        if (!stream) {
          stream = createWriteStream(join(this.dir, name), { flags: "a", mode: 0o600 });
          stream.on("error", (err) => this.failed(name, err));
        }
        stream.write(`${line}\n`);
      },
      close: () => {
        closed = true;
        if (!stream) return;
        const done = new Promise<void>((resolve) => stream?.once("close", resolve));
        this.closing.add(done);
        void done.then(() => this.closing.delete(done));
        stream.end();
      },
    };
  }

  /** Resolves once the files of the runs ended so far are written (before the process exits). */
  async flushed(): Promise<void> {
    await Promise.all(this.closing);
  }

  private failed(name: string, err: Error) {
    if (this.failureLogged) return;
    this.failureLogged = true;
    this.logger.error("debug capture could not write (later failures are not logged)", {
      file: join(this.dir, name),
      error: err.message,
    });
  }
}
