import { once } from "node:events";
import { createWriteStream } from "node:fs";
import { join } from "node:path";
import {
  assistant,
  messageStart,
  result,
  streamEvent,
  systemInit,
  textDelta,
  toolResult,
  toolUse,
  toolUseStart,
} from "../test/support/stream-json-lines.js";

// Recorded-style transcripts for the fake CLI to `cat`: the line shapes of the real CLI
// (test/support/stream-json-lines.ts), written once per bench run to a temporary directory.

type Json = Record<string, unknown>;

/** Deltas per assistant message, about what one long answer streams. */
export const DELTAS_PER_MESSAGE = 500;
const WORDS = ["the ", "bridge ", "streams ", "each ", "token ", "as ", "it ", "comes; "];

async function writeLines(path: string, lines: Iterable<Json | string>): Promise<string> {
  const out = createWriteStream(path);
  for (const line of lines) {
    const text = typeof line === "string" ? line : JSON.stringify(line);
    if (!out.write(`${text}\n`)) await once(out, "drain");
  }
  out.end();
  await once(out, "finish");
  return path;
}

/** `deltas` text deltas in messages of DELTAS_PER_MESSAGE, each repeated whole, then a result. */
function* answer(deltas: number): Generator<Json> {
  yield systemInit();
  for (let m = 0; m * DELTAS_PER_MESSAGE < deltas; m++) {
    const id = `msg_${m}`;
    const count = Math.min(DELTAS_PER_MESSAGE, deltas - m * DELTAS_PER_MESSAGE);
    const parts: string[] = [];
    yield messageStart(id);
    yield streamEvent(id, {
      type: "content_block_start",
      index: 0,
      content_block: { type: "text", text: "" },
    });
    for (let i = 0; i < count; i++) {
      const part = WORDS[(m * DELTAS_PER_MESSAGE + i) % WORDS.length] ?? "x";
      parts.push(part);
      yield textDelta(id, 0, part);
    }
    yield assistant(id, [{ type: "text", text: parts.join("") }]);
    yield streamEvent(id, { type: "content_block_stop", index: 0 });
    yield streamEvent(id, { type: "message_stop" });
  }
  yield result();
}

/**
 * `count` whole assistant text messages and no `stream_event` deltas, as `claude -p` prints an
 * answer without --include-partial-messages: each message its own line, then a result.
 */
function* wholeMessages(count: number): Generator<Json> {
  yield systemInit();
  for (let m = 0; m < count; m++) {
    const text = Array.from({ length: 8 }, (_, i) => WORDS[(m + i) % WORDS.length]).join("");
    yield assistant(`msg_${m}`, [{ type: "text", text }]);
  }
  yield result();
}

/** A tool call whose result is one line of about `bytes` bytes (a big file read), then an answer. */
function* bigToolResult(bytes: number): Generator<Json | string> {
  yield systemInit();
  yield messageStart("msg_read");
  yield toolUseStart("msg_read", 0, "toolu_read", "Read");
  yield assistant("msg_read", [toolUse("toolu_read", "Read", { file_path: "/tmp/big.log" })]);
  // Log-like text with newlines, so that the JSON holds escapes as a real file's would.
  const row = "2025-06-01T12:00:00.000Z INFO request handled path=/v1/sessions status=200 ms=3\n";
  const content = row.repeat(Math.ceil(bytes / (row.length + 1)));
  yield JSON.stringify(toolResult("toolu_read", content));
  yield* answer(10);
}

export interface Transcripts {
  small: string;
  relay: Record<number, string>;
  /** By message count: whole assistant messages without deltas. */
  whole: Record<number, string>;
  bigLine: string;
}

export async function writeTranscripts(
  dir: string,
  relaySizes: number[],
  wholeSizes: number[],
  bigLineBytes: number,
): Promise<Transcripts> {
  const relay: Record<number, string> = {};
  for (const n of relaySizes) relay[n] = await writeLines(join(dir, `relay-${n}.jsonl`), answer(n));
  const whole: Record<number, string> = {};
  for (const n of wholeSizes) {
    whole[n] = await writeLines(join(dir, `whole-${n}.jsonl`), wholeMessages(n));
  }
  return {
    small: await writeLines(join(dir, "small.jsonl"), answer(5)),
    relay,
    whole,
    bigLine: await writeLines(join(dir, "big-line.jsonl"), bigToolResult(bigLineBytes)),
  };
}
