import type { BridgeEvent, CompletionEvent } from "../../events.js";
import type { Logger } from "../../log.js";
import type { RunRequest } from "./run-request.js";

// Whether a run starts the CLI's session (`--session-id`) or continues it (`--resume`) is asked
// of the store beforehand (`resume`: an earlier run of the session was started), but only the CLI
// knows whether it kept a conversation: a first run that was cancelled, killed or whose server
// died may or may not have left one, depending on how far the CLI got. When the CLI answers that
// the other flag was needed, and did nothing else, the run starts again once with that flag.
//
// What claude 2.1.328 answers, before it does anything (observed against the mock Messages API):
// - `--resume=ID` with no conversation under ID (none, or a transcript without a message): a
//   `result` line whose `errors` say "No conversation found with session ID: ID", exit code 1;
// - `--session-id=ID` when a transcript of ID exists: "Error: Session ID ID is already in use."
//   on stderr, nothing on stdout, exit code 1.
// With `-w`, `--session-id` of an existing session is not refused: the CLI starts the worktree's
// conversation afresh and the model never sees the earlier messages. That is why the store says
// resume for any session that had a run started, and this falls back the other way only when the
// CLI says there is nothing to resume.

/** Whether the failed completion says the session needed the other flag. */
function otherFlagNeeded(req: RunRequest, completion: CompletionEvent): boolean {
  if (completion.status !== "failed" || completion.error === null) return false;
  const id = req.claudeSessionId;
  return req.resume
    ? completion.error.includes(`No conversation found with session ID: ${id}`)
    : completion.error.includes(`Session ID ${id} is already in use`);
}

/**
 * The batches of `attempt(req)`; when its only event is a completion saying the session needed
 * the other flag, those of one attempt with that flag instead.
 */
export async function* withSessionFallback(
  req: RunRequest,
  attempt: (req: RunRequest) => AsyncGenerator<BridgeEvent[]>,
  log: Logger,
): AsyncGenerator<BridgeEvent[]> {
  let relayed = false;
  let retry = false;
  for await (const batch of attempt(req)) {
    const [only] = batch;
    if (!relayed && batch.length === 1 && only?.type === "completion") {
      retry = otherFlagNeeded(req, only);
      if (retry) break;
    }
    relayed = true;
    yield batch;
  }
  if (!retry) return;
  log.info(
    req.resume
      ? "the CLI has no conversation to resume; starting the session instead"
      : "the CLI already has this session; resuming it instead",
    { claude_session_id: req.claudeSessionId },
  );
  yield* attempt({ ...req, resume: !req.resume });
}
