import {
  type AgentBridgeClient,
  ApiProblem,
  type FinishedRun,
  type Run,
  type StreamedEvent,
} from "../client/index.js";
import type { TerminalApprover } from "./approvals.js";
import { EXIT, Exit, exitCodeOf } from "./exit-codes.js";
import { printJson } from "./print.js";
import { type Output, RunRenderer } from "./render.js";

// Following a run from the terminal: a run a command starts, shown as asked, or live with the
// person's answers to its permission requests, until its completion or Ctrl-C.

/**
 * A run a command starts, shown as asked: its id at once (`--async`; the run with `--json`), the
 * finished run as JSON (`--json`), or live (`watchRun`). Exits with the run's status when it waited.
 */
export async function showNewRun(
  out: Output,
  client: AgentBridgeClient,
  options: { json?: boolean; async?: boolean },
  start: {
    queued: () => Promise<Run>;
    finished: () => Promise<FinishedRun>;
    live: (signal: AbortSignal) => AsyncGenerator<StreamedEvent>;
  },
  approver?: TerminalApprover,
): Promise<void> {
  if (options.async) {
    const run = await start.queued();
    if (options.json) printJson(out, run);
    else out.stdout.write(`${run.id}\n`);
    return;
  }
  if (options.json) {
    const finished = await start.finished();
    printJson(out, finished);
    throw new Exit(exitCodeOf(finished.completion.status));
  }
  const controller = new AbortController();
  await watchRun(out, start.live(controller.signal), client, controller, approver);
}

/**
 * Shows a run as it happens. Ctrl-C asks once whether to cancel the run or detach from it (on a
 * terminal; elsewhere it detaches); a second Ctrl-C detaches at once.
 */
export async function watchRun(
  out: Output,
  events: AsyncGenerator<StreamedEvent>,
  client: AgentBridgeClient,
  controller: AbortController,
  approver?: TerminalApprover,
): Promise<void> {
  const renderer = new RunRenderer(out);
  let runId: string | undefined;
  let asked = false;
  const onInterrupt = () => {
    renderer.close();
    if (asked || !runId || !process.stdin.isTTY) return controller.abort();
    asked = true;
    void askCancelOrDetach(out).then(async (answer) => {
      if (answer === "detach") return controller.abort();
      if (runId) await client.cancelRun(runId).catch(() => controller.abort());
    });
  };
  process.on("SIGINT", onInterrupt);
  try {
    for await (const event of events) {
      if (event.type === "run_started") runId = event.run_id;
      renderer.event(event);
      if (event.type === "permission_request" && approver && runId) {
        await answerRequest(out, client, runId, event, approver);
      }
      if (event.type === "completion") throw new Exit(exitCodeOf(event.status));
    }
  } catch (err) {
    if (!controller.signal.aborted) throw err;
    renderer.close();
    out.stderr.write(
      runId
        ? `detached; the run goes on: agent-bridge runs events ${runId} --follow\n`
        : "detached\n",
    );
    throw new Exit(EXIT.detached);
  } finally {
    process.off("SIGINT", onInterrupt);
  }
}

/** Puts a permission request to the person at the terminal and posts their answer. */
async function answerRequest(
  out: Output,
  client: AgentBridgeClient,
  runId: string,
  request: Extract<StreamedEvent, { type: "permission_request" }>,
  approver: TerminalApprover,
): Promise<void> {
  const answer = await approver.answer(request);
  try {
    await client.answer(runId, request.request_id, answer);
  } catch (err) {
    // Answered elsewhere, timed out or withdrawn meanwhile: its permission_resolved says how.
    if (!(err instanceof ApiProblem && err.status === 409)) throw err;
    out.stderr.write(`${err.problem?.detail ?? err.message}\n`);
  }
}

function askCancelOrDetach(out: Output): Promise<"cancel" | "detach"> {
  out.stderr.write("\nCancel the run (c) or detach and leave it going (d)? ");
  const stdin = process.stdin;
  stdin.setRawMode(true);
  stdin.resume();
  return new Promise((resolve) => {
    stdin.once("data", (data) => {
      stdin.setRawMode(false);
      stdin.pause();
      const key = data.toString().toLowerCase();
      out.stderr.write(`${key.startsWith("c") ? "cancelling" : "detaching"}\n`);
      resolve(key.startsWith("c") ? "cancel" : "detach");
    });
  });
}
