// The Agent SDK's own loop as a peer in the bench (issue 43): a Node process of its own, plain
// JavaScript as a user's program would be, running `query()` of @anthropic-ai/claude-agent-sdk
// against the bench's stand-in CLI (argv[2]; a non-.js path, so the SDK spawns it directly, with
// its stream-json flags and `--include-partial-messages`, writes its `initialize` request and
// then the prompt as a stream-json user message on stdin).
//
// It reads one request a line on stdin, `{"prompt", "count", "settleMs"}`: `count` queries of
// that prompt at once, each consumed to its last message. It answers one JSON line a request:
// each query's time from its `query()` call to its first text delta (`stream_event`) and to its
// `result` message, what it saw, the time to the last `result`, and the process's own CPU
// (`process.cpuUsage()`: user and system, all its threads, not the stand-in CLI's) from the
// first `query()` to `settleMs` after the last query ended, so that work left after the result
// counts, as it does for the bridge's server.
import { createInterface } from "node:readline";
import { setTimeout as sleep } from "node:timers/promises";
import { query } from "@anthropic-ai/claude-agent-sdk";

const bin = process.argv[2];
if (!bin) throw new Error("usage: node bench/sdk-peer.mjs <claude executable>");

async function one(prompt, t0) {
  const out = {
    firstDeltaMs: null,
    resultMs: null,
    result: null,
    messages: 0,
    deltas: 0,
    assistants: 0,
  };
  const options = { pathToClaudeCodeExecutable: bin, includePartialMessages: true };
  for await (const message of query({ prompt, options })) {
    out.messages++;
    if (message.type === "stream_event") {
      const { event } = message;
      if (event.type === "content_block_delta" && event.delta.type === "text_delta") {
        out.deltas++;
        out.firstDeltaMs ??= performance.now() - t0;
      }
    } else if (message.type === "assistant") {
      out.assistants++;
    } else if (message.type === "result") {
      out.resultMs = performance.now() - t0;
      out.result = message.subtype;
    }
  }
  return out;
}

for await (const line of createInterface({ input: process.stdin })) {
  const { prompt, count = 1, settleMs = 0 } = JSON.parse(line);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const runs = await Promise.all(Array.from({ length: count }, () => one(prompt, t0)));
  const wallMs = Math.max(...runs.map((r) => r.resultMs ?? Number.NaN));
  await sleep(settleMs);
  const cpu = process.cpuUsage(cpu0);
  process.stdout.write(
    `${JSON.stringify({ runs, wallMs, cpuMs: (cpu.user + cpu.system) / 1000 })}\n`,
  );
}
