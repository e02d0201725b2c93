// A scripted stand-in for an agent CLI (`claude` or `codex`, the scenario's `dialect`), for the
// runner's edge cases. It reads a JSON scenario (path in FAKE_CLI_SCENARIO; see fake-cli.ts for the
// typed builder, fake-dialects.ts for the lines of each dialect) and plays its steps in order.
// Everything it sees (pid, argv, each stdin line, stdin EOF, signals, grandchild pids) is appended
// as NDJSON to the scenario's `record` file so tests can assert on it.
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { once } from "node:events";
import { appendFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";

const scenarioPath = process.env.FAKE_CLI_SCENARIO ?? "";
const scenario = JSON.parse(readFileSync(scenarioPath, "utf8"));

const record = (entry) => {
  if (scenario.record) appendFileSync(scenario.record, `${JSON.stringify(entry)}\n`);
};
record({ pid: process.pid, args: process.argv.slice(2), cwd: process.cwd(), env: process.env });

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// stdin: framed by lines, recorded, and waitable.
const stdinLines = [];
let stdinEnded = false;
let pendingStdin = "";
let wake = () => {};
const changed = () => new Promise((resolve) => (wake = resolve));
process.stdin.setEncoding("utf8");
process.stdin.on("data", (text) => {
  pendingStdin += text;
  for (let nl = pendingStdin.indexOf("\n"); nl !== -1; nl = pendingStdin.indexOf("\n")) {
    const line = pendingStdin.slice(0, nl);
    pendingStdin = pendingStdin.slice(nl + 1);
    stdinLines.push(line);
    record({ from: process.pid, stdin: line });
    if (isInterrupt(line)) void endTurnInterrupted(JSON.parse(line).request_id);
  }
  wake();
});
process.stdin.on("end", () => {
  // codex's prompt ends without a newline.
  if (pendingStdin) {
    stdinLines.push(pendingStdin);
    record({ from: process.pid, stdin: pendingStdin });
  }
  stdinEnded = true;
  record({ stdinEnd: true });
  wake();
});

const write = (stream, data) =>
  new Promise((resolve) => {
    stream.write(data, () => resolve());
  });

function isInterrupt(line) {
  if (scenario.dialect === "codex" || scenario.ignoreInterrupt) return false;
  try {
    const parsed = JSON.parse(line);
    return parsed.type === "control_request" && parsed.request?.subtype === "interrupt";
  } catch {
    return false;
  }
}

// What Claude Code 2.1.328 writes when the bridge interrupts its turn (captured against the mock
// Messages API): the control response, the transcript's marker, an error result; then it exits.
async function endTurnInterrupted(requestId) {
  const session_id = "fake-session";
  const lines = [
    {
      type: "control_response",
      response: { subtype: "success", request_id: requestId, response: {} },
    },
    {
      type: "user",
      message: { role: "user", content: [{ type: "text", text: "[Request interrupted by user]" }] },
      parent_tool_use_id: null,
      session_id,
      uuid: randomUUID(),
    },
    {
      type: "result",
      subtype: "error_during_execution",
      is_error: true,
      terminal_reason: "aborted_streaming",
      duration_ms: 1,
      duration_api_ms: 0,
      num_turns: 1,
      session_id,
      total_cost_usd: scenario.interruptedCostUsd ?? 0,
      usage: {
        input_tokens: 0,
        output_tokens: 0,
        cache_read_input_tokens: 0,
        cache_creation_input_tokens: 0,
      },
      modelUsage: {},
      permission_denials: [],
      uuid: randomUUID(),
    },
  ];
  for (const line of lines) await write(process.stdout, `${JSON.stringify(line)}\n`);
  await waitStdinEnd();
  process.exit(0);
}

let consumedStdin = 0;
async function waitStdinType(type) {
  for (;;) {
    while (consumedStdin < stdinLines.length) {
      const line = stdinLines[consumedStdin++];
      try {
        if (JSON.parse(line).type === type) return;
      } catch {}
    }
    if (stdinEnded) return;
    await changed();
  }
}

async function waitStdinEnd() {
  while (!stdinEnded) await changed();
}

// codex's thread: the one `exec resume <thread> -` names, else a new one. Its usage totals are
// kept beside the scenario, since codex reports running totals over the thread.
const args = process.argv.slice(2);
const thread = args[1] === "resume" ? args[args.length - 2] : randomUUID();
const totalsPath = join(dirname(scenarioPath), `thread-${thread}.json`);

function codexTurnCompleted(turn) {
  const totals = existsSync(totalsPath) ? JSON.parse(readFileSync(totalsPath, "utf8")) : {};
  for (const [key, n] of Object.entries(turn)) totals[key] = (totals[key] ?? 0) + n;
  writeFileSync(totalsPath, JSON.stringify(totals));
  return { type: "turn.completed", usage: totals };
}

async function grandchild(step) {
  const seconds = String(step.seconds ?? 30);
  const trap = step.ignoreSigterm ? "trap '' TERM; " : "";
  // Inherits stdout and stderr: the pipe stays open as long as it lives. It says on fd 3 that it
  // runs (with its trap set) before the next step plays, so a signal cannot come too early.
  const child = spawn("sh", ["-c", `${trap}echo >&3; exec sleep ${seconds} 3>&-`], {
    stdio: ["ignore", "inherit", "inherit", "pipe"],
  });
  await once(child.stdio[3], "data");
  child.stdio[3].destroy();
  record({ grandchild: child.pid });
  child.unref();
}

// Like the real CLIs, it has read the prompt (its first line, or all of stdin) before it answers:
// what a test reads of the record after the run holds the prompt.
while (stdinLines.length === 0 && !stdinEnded) await changed();

for (const step of scenario.steps) {
  if ("emit" in step) await write(process.stdout, `${JSON.stringify(step.emit)}\n`);
  else if ("codexThreadStarted" in step) {
    await write(
      process.stdout,
      `${JSON.stringify({ type: "thread.started", thread_id: thread })}\n`,
    );
  } else if ("codexTurnCompleted" in step) {
    await write(process.stdout, `${JSON.stringify(codexTurnCompleted(step.codexTurnCompleted))}\n`);
  } else if ("text" in step) await write(process.stdout, step.text);
  else if ("bytes" in step) await write(process.stdout, Buffer.from(step.bytes));
  else if ("bigToolResult" in step) {
    const content = "x".repeat(step.bigToolResult);
    const message = {
      type: "user",
      message: {
        role: "user",
        content: [{ type: "tool_result", tool_use_id: "toolu_big", content, is_error: false }],
      },
      parent_tool_use_id: null,
      session_id: "fake-session",
      uuid: "big-uuid",
      tool_use_result: { stdout: content, stderr: "", interrupted: false },
    };
    await write(process.stdout, `${JSON.stringify(message)}\n`);
  } else if ("stderr" in step) await write(process.stderr, step.stderr);
  else if ("sleep" in step) await sleep(step.sleep);
  else if ("exit" in step) process.exit(step.exit);
  else if ("ignoreSigterm" in step) {
    process.on("SIGTERM", () => record({ signal: "SIGTERM" }));
  } else if ("grandchild" in step) await grandchild(step.grandchild);
  else if ("waitStdin" in step) await waitStdinType(step.waitStdin);
  else if ("waitStdinEnd" in step) await waitStdinEnd();
  else if ("waitFile" in step) {
    while (!existsSync(step.waitFile)) await sleep(20);
  } else if ("mark" in step) record({ mark: step.mark });
  else if ("appendFile" in step) {
    mkdirSync(dirname(step.appendFile.path), { recursive: true });
    appendFileSync(step.appendFile.path, step.appendFile.text);
  } else throw new Error(`fake-cli: unknown step ${JSON.stringify(step)}`);
}

if (scenario.end === "hang") {
  // Like a CLI that never finishes: only a signal ends it.
  setInterval(() => {}, 1 << 30);
} else {
  // Like the real CLI: exit once stdin closes.
  await waitStdinEnd();
  process.exit(scenario.exitCode ?? 0);
}
