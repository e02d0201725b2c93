import type { LongLine } from "../../process/framer.js";

/**
 * What the framer cuts of the CLI's stdout: strings of over 1 MiB in `user` lines of over 4 MiB,
 * which is where the CLI writes a tool's output (twice: the message and `tool_use_result`). A
 * `tool_result` event keeps 16 384 characters, so no event changes; only a big output's unused
 * rest is not kept. Lines with text the user reads (`stream_event`, `assistant`, `result`) are
 * never cut: they are kept whole up to the line bound, and a line over it is dropped and counted
 * in the completion.
 */
export const CLAUDE_LONG_LINE: LongLine = {
  overBytes: 4 * 1024 * 1024,
  maxStringBytes: 1024 * 1024,
  startingWith: '{"type":"user"',
};
